"""``python -m actors.keys generate DIR``: CURVE key pairs for `actors.Security`.

Writes ``DIR/NAME.key`` (public) and ``DIR/NAME.key_secret`` (the pair; readable by
its owner only) in ``zmq.auth``'s certificate format, and authorises the public key
by copying it into ``DIR/authorized/``. The default name, ``self``, makes the pair
that ``Security.from_dir(DIR)`` and ``ACTORGRAD_CURVE_DIR=DIR`` use; other names
make keys for clients (a C program, another service) that this job accepts.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
from typing import List, Optional, Tuple

import zmq.auth

from actors.runtime.process.log import get_logger

log = get_logger("actors.keys")


def generate(directory: "str | os.PathLike[str]", name: str = "self",
             authorize: bool = True) -> Tuple[pathlib.Path, pathlib.Path]:
    """Write a new key pair `name` into `directory`: ``(public file, secret file)``.

    FileExistsError if the pair is there already (keys are never overwritten).
    """
    root = pathlib.Path(directory)
    public, secret = root / f"{name}.key", root / f"{name}.key_secret"
    for path in (public, secret):
        if path.exists():
            raise FileExistsError(f"{path} exists: remove it first to replace the key")
    root.mkdir(parents=True, exist_ok=True)
    zmq.auth.create_certificates(root, name)
    secret.chmod(0o600)
    if authorize:
        (root / "authorized").mkdir(exist_ok=True)
        shutil.copyfile(public, root / "authorized" / public.name)
    log.info("curve_keys_generated", directory=str(root), name=name, authorized=authorize)
    return public, secret


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m actors.keys",
                                     description="Make CURVE keys for actorgrad's security.")
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("generate", help="write a key pair and authorise it")
    make.add_argument("directory", help="where the keys go (ACTORGRAD_CURVE_DIR)")
    make.add_argument("--name", default="self",
                      help="the pair's name: 'self' (default) for the job's processes, "
                           "another for a client")
    make.add_argument("--no-authorize", action="store_true",
                      help="do not copy the public key into DIR/authorized/")
    args = parser.parse_args(argv)
    try:
        public, secret = generate(args.directory, args.name, not args.no_authorize)
    except FileExistsError as exc:
        parser.exit(1, f"{exc}\n")
    sys.stdout.write(f"public key: {public}\nsecret key: {secret}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
