"""`drover --help` from the user's cache is the text click renders, and a stale cache is ignored."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def test_cached_help_is_what_click_prints_and_a_stale_cache_is_rendered_again(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    rendered = subprocess.run([sys.executable, "-c", "from drover.cli.main import cli; cli(['--help'], prog_name='drover')"],
                              capture_output=True, text=True, env=env).stdout
    assert rendered.startswith("Usage: drover [OPTIONS] COMMAND")
    first = subprocess.run([str(BIN / "drover"), "--help"], capture_output=True, text=True, env=env)
    cache = tmp_path / "cache" / "drover" / "help.txt"
    assert first.stdout == rendered and cache.is_file()
    cache.write_text(cache.read_text().replace("Usage:", "Stale:", 1))
    assert subprocess.run([str(BIN / "drover"), "-h"], capture_output=True, text=True, env=env).stdout == rendered.replace("Usage:", "Stale:", 1)
    key, rest = cache.read_text().split("\n", 1)
    cache.write_text("drover-help 0 0 80\n" + rest)  # another drover's cli.py: render afresh
    assert subprocess.run([str(BIN / "drover"), "--help"], capture_output=True, text=True, env=env).stdout == rendered


def test_a_change_to_any_module_of_the_package_renders_the_help_afresh(tmp_path):
    import drover.vocabulary

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    subprocess.run([str(BIN / "drover"), "--help"], capture_output=True, text=True, env=env, check=True)
    cache = tmp_path / "cache" / "drover" / "help.txt"
    cache.write_text(cache.read_text().replace("Usage:", "Stale:", 1))
    module = Path(drover.vocabulary.__file__)
    info = module.stat()
    try:
        os.utime(module, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
        again = subprocess.run([str(BIN / "drover"), "--help"], capture_output=True, text=True, env=env).stdout
    finally:
        os.utime(module, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert again.startswith("Usage: drover")
