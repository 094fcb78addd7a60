"""Run a function on WORLD CPU processes joined by gloo (forked, so torch and
transformers are imported once; a file store, so no TCP rendezvous)."""
import datetime
import os
import sys
import tempfile
import traceback


def _entry(fn, rank, world, store, args):
    import torch.distributed as dist
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1")
    code = 0
    try:
        # a rank that fails makes the others' collectives time out, not hang
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=180))
        fn(rank, world, *args)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def launch(fn, world, *args, timeout=600):
    """fn(rank, world, *args) on every rank; returns None or why it failed."""
    import multiprocessing as mp
    fd, store = tempfile.mkstemp(prefix="store.", dir=os.getcwd())
    os.close(fd)
    os.unlink(store)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_entry, args=(fn, r, world, store, args)) for r in range(world)]
    for p in procs:
        p.start()
    why = None
    for r, p in enumerate(procs):
        p.join(timeout)
        if p.is_alive():
            why = why or f"rank {r} still running after {timeout} s"
            p.kill()
            p.join()
        elif p.exitcode != 0:
            why = why or f"rank {r} exited with status {p.exitcode} (traceback above)"
    if os.path.exists(store):
        os.unlink(store)
    return why
