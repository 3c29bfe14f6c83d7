from per_cli.cli import app

app(prog_name="per")
