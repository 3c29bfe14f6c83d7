"""What ``per train`` does around a stage: ``--config`` resolved to a file, cohorts of seeds, the closing lines."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import typer

from per_cli.cli.usage import EXIT_RUN_FAILED, MAX_NAME_BYTES, check_run_name, say_notes, shown
from per_cli.errors import ConfigError, cut


def resolve_config_option(config: str | None) -> Path | None:
    """``--config`` as a file: an existing path, else a shipped config by name; a note when a local file
    shadows a shipped config. Raises ConfigError for an unknown or ambiguous name."""
    if config is None:
        return None
    from per_cli.config.shipped import resolve_config

    resolved = resolve_config(config)
    say_notes(resolved.note)
    return resolved.path


# bytes a command writes below the directory it is given: a run or grid name (at most MAX_NAME_BYTES), a run
# inside a grid, its checkpoints and file names
PATH_ROOM = 3 * MAX_NAME_BYTES


def check_writable_dir(path: Path, option: str, what: str) -> None:
    """``path`` (given as ``option``) must be a directory this process can create ``what`` in; anything else (a file,
    a read-only or full place, a path too long) is bad input, found before anything is written."""
    import tempfile

    check_path_length(path, option)
    try:
        is_file = path.exists() and not path.is_dir()
    except OSError as exc:  # (a name the system refuses to look up)
        raise ConfigError(f"{option} {_cut(path)}: cannot be used ({exc.strerror or exc}); give another path") from None
    if is_file:
        raise ConfigError(f"{option} {_cut(path)}: is a file, not a directory; give a directory")
    made = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        Path(tempfile.mkdtemp(prefix=".per-probe-", dir=path)).rmdir()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"{option} {_cut(path)}: cannot create {what} there ({reason}); give a writable directory"
        ) from None
    finally:
        for folder in made:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()


def hold_grid_run(run_dir: Path):  # noqa: ANN201 - a rundir.locks.Lock, or None
    """A run of a ``per grid`` is trained under the grid's lock for it (``<grid>/.locks/<run>.lock``), not its own
    ``.lock``: ``--resume`` of such a run takes that lock too, refused while the grid trains the run."""
    from per_cli.rundir.locks import Locked, hold_lock
    from per_cli.sweep.status import LOCKS_DIR

    path = run_dir.parent / LOCKS_DIR / f"{run_dir.name}.lock"
    if not path.is_file():
        return None
    try:
        return hold_lock(path, wait_s=0)
    except Locked:
        raise ConfigError(f"--resume: {shown(run_dir)} is being trained by per grid; wait for it or stop it") from None


def check_plot_out(runs_dir: Path, out: Path | None) -> None:
    """``per plot``'s ``--out`` (default RUNS_DIR/plots) must take figures and tables: checked before any run
    is read. The default is left to the RUNS_DIR check where RUNS_DIR is no directory."""
    if out is None:
        with contextlib.suppress(OSError):
            if runs_dir.is_dir():
                check_writable_dir(runs_dir / "plots", "--out (default RUNS_DIR/plots)", "figures")
        return
    check_writable_dir(out, "--out", "figures")


@contextlib.contextmanager
def new_files_removed_on_error(folder: Path) -> Iterator[None]:
    """Run the block; if it raises (a full disk while figures are saved), remove the files and folders it made in
    ``folder`` (and ``folder``) and re-raise: nothing half-written stays. Files it rewrote are its own outputs."""
    try:
        made = [p for p in (folder, *folder.parents) if not p.exists()]
        before = set(folder.rglob("*")) if folder.is_dir() else set()
    except OSError:  # a path the system refuses (too long): the block says so itself, having made nothing
        made, before = [], None
    try:
        yield
    except BaseException:
        if before is not None and folder.is_dir():
            for path in sorted(set(folder.rglob("*")) - before, key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
        for path in made:  # the deepest first
            with contextlib.suppress(OSError):
                path.rmdir()
        raise


def check_path_length(path: Path, option: str) -> None:
    """A path the system can take, with room for what is written below it: no name over the file system's
    longest (255 bytes), the whole under its longest path (4096) less :data:`PATH_ROOM`."""
    name_max, path_max = 255, 4096
    with contextlib.suppress(OSError, ValueError):
        anchor = next(p for p in (path, *path.parents) if p.is_dir())
        name_max, path_max = os.pathconf(anchor, "PC_NAME_MAX"), os.pathconf(anchor, "PC_PATH_MAX")
    longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
    if longest > name_max:
        raise ConfigError(
            f"{option} {_cut(path)}: a folder name in it is {longest:,} bytes long; the file system takes at most "
            f"{name_max}"
        )
    length = len(os.fsencode(path.absolute()))
    if length + PATH_ROOM > path_max:
        raise ConfigError(
            f"{option} {_cut(path)}: the path is {length:,} bytes long; the system takes {path_max:,} for a whole "
            f"path and what is written below it needs {PATH_ROOM}, so give one under {path_max - PATH_ROOM:,}"
        )


def _cut(path: Path) -> str:
    """A path for an error line: quoted, and cut to a readable length."""
    return cut(shown(path))


def say_when_compiling(stack: contextlib.ExitStack, quiet: bool) -> None:
    """Until ``stack`` closes, a note at the run's first compile of a kernel (per_cli/cli/compiling.py). Called
    once numba is imported (with the trainer), so that bad input is refused without importing it."""
    from per_cli.cli.compiling import compile_note

    if not quiet:
        stack.enter_context(compile_note(say_notes))


def train_solo(compiling, config, overrides, seed, runs_dir, name, device, quiet, resume) -> None:  # noqa: ANN001
    """``per train`` of one seed (or ``--resume RUN_DIR``): every check, and the run directory's claim, before anything
    is written; exit 2 for bad input, 1 for a failed run, 128 + the signal for an interrupted one. ``compiling``: the
    command's ExitStack, which holds the compile note (:func:`say_when_compiling`) until the command ends."""
    from per_cli.config import load_config

    claim = grid_lock = None
    try:
        if resume is not None:
            if config is not None or seed is not None or name is not None:
                raise ConfigError("--resume: the run continues with its own config.yaml; drop --config, --seed, --name")
            if not (resume / "config.yaml").is_file():
                raise ConfigError(f"--resume: {shown(resume)} is not a run directory (it has no config.yaml)")
            cfg = load_config(resume / "config.yaml", overrides, device=device)
        else:
            check_run_name(name)
            cfg = load_config(resolve_config_option(config), overrides, seed=seed, device=device)
        # bad keys and values are refused above, before torch and Gymnasium are imported
        from per_cli.rundir.claim import claim_existing, claim_free_name, claim_new
        from per_cli.train.checkpoints.checkpoint import load_checkpoint
        from per_cli.train.checkpoints.resume import check_resume
        from per_cli.train.loop.progress import train_progress
        from per_cli.train.loop.setup import default_run_name
        from per_cli.train.loop.trainer import build_member, run_member
        from per_cli.train.loop.trainer_state import resume as resume_member
        from per_cli.train.preflight import notes, preflight

        loaded = None
        if resume is not None:  # the checkpoint and the resume rules before preflight imports any plugin
            claim = claim_existing(resume)
            grid_lock = hold_grid_run(resume)
            loaded = load_checkpoint(resume)
            check_resume(loaded.state["config"], loaded.state["loop"]["step"], loaded.state["loop"]["episode"], cfg)
        say_when_compiling(compiling, quiet)
        preflight(cfg)  # before the name: env ids and kinds become part of it
        if resume is not None:
            run_dir = resume
        else:
            check_writable_dir(runs_dir, "--runs-dir", "run directories")
            # (an exclusive mkdir: of two processes asking for one --name, the second is refused here)
            claim = claim_new(runs_dir / name) if name is not None else claim_free_name(runs_dir, default_run_name(cfg))
            run_dir = claim.path
        progress = train_progress(cfg.train.total_steps, run_dir.name, quiet, cfg.train.total_episodes)
        member = build_member(cfg, progress=progress)
        if resume is not None:
            resume_member(member, run_dir, loaded)
    except BaseException:  # (bad input: the claim taken back, then its one line)
        if claim is not None:
            claim.abandon()
        if grid_lock is not None:
            grid_lock.release()
        raise
    if not quiet:
        agent = member.agent  # (where the fast path declined, said once; also in summary.json)
        say_notes(*notes(cfg), agent.engine_note and f"agent.engine {agent.engine}: {agent.engine_note}")
    try:
        with progress:
            summary = run_member(member, run_dir)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: run_member raises RunInterrupted (exit 128 + signal)
        typer.echo(f"{exc or 'interrupted'}; recorded in {shown(run_dir / 'summary.json')}", err=True)
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None
    except Exception as exc:  # noqa: BLE001 - recorded in summary.json by the run
        from per_cli.train.loop.stopping import describe_failure

        line = describe_failure(exc, run_dir)
        typer.echo(f"error: run failed: {line} (see {shown(run_dir / 'summary.json')})", err=True)
        raise typer.Exit(EXIT_RUN_FAILED) from None
    finally:
        claim.release()
        if grid_lock is not None:
            grid_lock.release()
    if not quiet:
        from per_cli.train.loop.progress import done_line

        view = f"view: tensorboard --logdir {shown(run_dir.parent)}"
        typer.echo(f"{done_line(summary)}\nrun directory: {shown(run_dir)}\n{view}")


def train_cohort(compiling, config, overrides, seeds, runs_dir, device, quiet, clash) -> None:  # noqa: ANN001
    """``per train --seeds``: one run directory per seed (named as solo runs are), trained as one cohort.
    Exit 1 when a seed failed (its summary.json says why; the other seeds completed). ``compiling``: as
    :func:`train_solo`'s."""
    from per_cli.config import load_config
    from per_cli.config.seeds import parse_seeds, single_seed_note

    claims = []
    try:
        if any(value is not None for value in clash):
            raise ConfigError("--seeds: a cohort names its runs by seed and starts anew; drop --seed, --name, --resume")
        seed_list = parse_seeds(seeds)
        cfg = load_config(resolve_config_option(config), overrides, device=device)
        # bad keys and values are refused above, before torch and Gymnasium are imported
        from per_cli.rundir.claim import claim_free_name
        from per_cli.train.loop.cohort import Cohort, cohort_configs
        from per_cli.train.loop.progress import train_progress
        from per_cli.train.loop.setup import default_run_name
        from per_cli.train.preflight import notes, preflight

        say_when_compiling(compiling, quiet)
        cfgs = cohort_configs(cfg, seed_list)
        preflight(cfgs[0], members=len(cfgs))  # before the names: env ids and kinds become part of them
        check_writable_dir(runs_dir, "--runs-dir", "run directories")
        for cfg in cfgs:  # each seed's directory claimed as a solo run's (a taken default name: the next free one)
            claims.append(claim_free_name(runs_dir, default_run_name(cfg)))
        run_dirs = [claim.path for claim in claims]
        t = cfgs[0].train
        progress = train_progress(t.total_steps, f"cohort of {len(cfgs)} seeds", quiet, t.total_episodes)
        cohort = Cohort(cfgs, progress=progress)
    except BaseException:  # (bad input: the claims taken back, then its one line)
        for claim in claims:
            claim.abandon()
        raise
    if not quiet:
        say_notes(single_seed_note(seeds, seed_list), *notes(cfgs[0]), cohort.note)
    try:
        with progress:
            summaries = cohort.run(run_dirs)
    except KeyboardInterrupt as exc:  # each unfinished run recorded `interrupted` in its summary.json
        typer.echo(f"{exc or 'interrupted'}; recorded in each run's summary.json under {shown(runs_dir)}", err=True)
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None
    finally:
        for claim in claims:
            claim.release()
    failed = [(d, s) for d, s in zip(run_dirs, summaries, strict=True) if s.get("status") != "completed"]
    for run_dir, summary in failed:
        typer.echo(f"error: run failed: {summary.get('error')} (see {shown(run_dir / 'summary.json')})", err=True)
    if not quiet:
        typer.echo(f"{len(summaries) - len(failed)} of {len(summaries)} runs completed in {shown(runs_dir)}")
    if failed:
        raise typer.Exit(EXIT_RUN_FAILED)
