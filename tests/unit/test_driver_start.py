"""Playwright's driver keeps its compiled code between starts (``driver.process.driver_compile_cache``)."""

from __future__ import annotations

import os

from driver.process import driver_compile_cache


def test_the_driver_s_compile_cache_is_the_user_s_own_and_a_given_one_or_a_refusal_is_kept() -> None:
    environ = {"XDG_CACHE_HOME": "/home/a/.cache-elsewhere"}
    driver_compile_cache(environ)
    assert environ["NODE_COMPILE_CACHE"] == "/home/a/.cache-elsewhere/kitsune/node-compile-cache"
    home: dict[str, str] = {}
    driver_compile_cache(home)
    assert home["NODE_COMPILE_CACHE"] == os.path.join(os.path.expanduser("~"), ".cache", "kitsune",
                                                      "node-compile-cache")
    given = {"NODE_COMPILE_CACHE": "/srv/cache"}
    driver_compile_cache(given)
    assert given == {"NODE_COMPILE_CACHE": "/srv/cache"}
    refused = {"NODE_DISABLE_COMPILE_CACHE": "1"}
    driver_compile_cache(refused)
    assert refused == {"NODE_DISABLE_COMPILE_CACHE": "1"}
