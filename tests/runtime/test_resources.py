"""Every resource owner gives back its threads, sockets and ports, closed or merely dropped.

Each drop scenario runs in a fresh process (`tests.runtime.resources_child`), so
that nothing another test left behind moves the counts: the child counts OS threads
and open fds after a warm-up, drops 200 objects without closing them, collects
garbage and waits (bounded) for the counts to come back; the test asserts on the
numbers it reports. The last test checks that live objects never hold up the
interpreter's exit.
"""
import contextlib
import os
import subprocess
import sys
import time

import pytest

from tests.net import free_port
from tests.runtime import resources_child
from tests.subprocesses import ROOT, running
from tests.waiting import wait_until

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # not in the quick set

COUNT = 200
CHILD_TIMEOUT = 100.0  # the child's rounds plus its two bounded release waits
EXIT_LIMIT = 2.0  # seconds an exit with live objects may add to start-up and imports
QUIET = {**os.environ, "ACTORGRAD_LOG_LEVEL": "warning"}


def run_scenario(scenario: str, tmp_path, **env: str) -> dict:
    """The counts a fresh child process reports for `COUNT` dropped rounds of `scenario`."""
    log_path = tmp_path / f"{scenario}.log"
    args = ["-m", "tests.runtime.resources_child", scenario, str(COUNT)]
    with running(args, log_path, env={**QUIET, **env}) as process:
        return child_result(process, log_path, scenario)


def child_result(process: subprocess.Popen, log_path, what: str) -> dict:
    """What a child reports in its log, waited for until CHILD_TIMEOUT or its exit."""
    wait_until(lambda: (resources_child.read_result(log_path.read_text()) is not None
                        or process.poll() is not None), CHILD_TIMEOUT, interval=0.1)
    output = log_path.read_text()
    result = resources_child.read_result(output)
    code = process.poll()
    assert result is not None, (
        f"the {what} child " + (f"exited with code {code}" if code is not None else
                                f"ran for {CHILD_TIMEOUT:g}s")
        + f" without reporting; its output ends:\n{output[-3000:]}")
    return result


def assert_released(result: dict) -> None:
    """Threads and fds back at the baseline, and every dropped server's port bindable."""
    problems = []
    if result["threads_after"] > result["threads_before"]:
        problems.append(f"threads {result['threads_before']} -> {result['threads_after']}")
    if result["fds_after"] > result["fds_before"]:
        problems.append(f"fds {result['fds_before']} -> {result['fds_after']}")
    if result["unbindable_ports"]:
        problems.append(f"{len(result['unbindable_ports'])} of {result['ports_checked']} "
                        f"ports still bound")
    assert not problems, f"{'; '.join(problems)} (waited {result['seconds_to_release']}s): {result}"


def test_dropping_200_tcp_store_pairs_without_close_leaves_no_threads_fds_or_ports(tmp_path):
    """A master and a client store, used once and dropped, free the server's threads and port."""
    assert_released(run_scenario("tcp_store_pair", tmp_path))


def test_dropping_200_started_actors_without_stop_leaves_no_threads_fds_or_ports(tmp_path):
    """A started actor that answered a PING and is dropped without stop() frees everything."""
    assert_released(run_scenario("actor", tmp_path))


def test_dropping_200_connected_channels_without_close_leaves_no_threads_or_fds(tmp_path):
    """A connected channel dropped without close() frees its sockets, and so does its peer."""
    result = run_scenario("channel", tmp_path)
    assert result["ports_checked"] == 0  # a channel binds nothing
    assert_released(result)


def test_dropping_200_named_call_clients_without_close_leaves_no_threads_or_fds(tmp_path):
    """An ExposedClient that made a JSON call and is dropped frees its sockets."""
    assert_released(run_scenario("exposed_client", tmp_path))


def test_dropping_200_actors_with_attached_sockets_leaves_no_threads_fds_or_ports(tmp_path):
    """Actors that made an attached PULL and PUSH, used them once and were dropped."""
    assert_released(run_scenario("attached_sockets", tmp_path))


def test_200_rpc_worlds_of_one_after_shutdown_leave_no_threads_fds_or_ports(tmp_path):
    """init_rpc, one rpc_sync and shutdown(), 200 times: the agent and its store free it all."""
    assert_released(run_scenario("rpc_world", tmp_path))


def test_200_process_groups_beside_rpc_worlds_after_destroy_leave_no_threads_fds_or_ports(
        tmp_path):
    """init_process_group and init_rpc on one env:// store, then destroy and shutdown, 200
    times: the transports, the agents and the shared store server free it all."""
    assert_released(run_scenario("process_group", tmp_path))


def test_dropping_200_rendezvous_handlers_from_the_registry_leaves_no_threads_fds_or_ports(
        tmp_path):
    """A c10d handler that hosts its store, joins and is dropped while heart-beating frees
    its keep-alive thread, the store's server and its port."""
    assert_released(run_scenario("rendezvous_handler", tmp_path))


def test_dropping_200_etcd_stores_with_watches_and_leases_leaves_no_threads_or_fds(
        tmp_path, etcd_endpoint):
    """An EtcdStore whose watch callback refers back to it, holding an ephemeral key, is
    collected when dropped: its stream, dispatcher and keep-alive threads end."""
    assert_released(run_scenario("etcd_store", tmp_path,
                                 **{resources_child.ETCD_VARIABLE: etcd_endpoint}))


def test_dropping_200_etcd_rendezvous_handlers_leaves_no_threads_or_fds(tmp_path,
                                                                         etcd_endpoint):
    """An "etcd" handler that joined and is dropped while heart-beating frees its
    keep-alive thread and its store's streams and lease."""
    assert_released(run_scenario("etcd_rendezvous_handler", tmp_path,
                                 **{resources_child.ETCD_VARIABLE: etcd_endpoint}))


def test_every_thread_of_an_rpc_world_a_process_group_and_a_watched_store_is_registered(
        tmp_path):
    """Two ranks, each with an RPC world, a process group (a queued collective, an irecv
    waiting), a distributed backward and a TCPStore pair with a watch: every live
    thread of the process is in the thread registry, and after shutdown, destroy and
    close the registry is back to what it held before."""
    port = free_port()
    with contextlib.ExitStack() as stack:
        ranks = []
        for rank in range(2):
            log_path = tmp_path / f"census-{rank}.log"
            env = {**QUIET, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                   "RANK": str(rank), "WORLD_SIZE": "2"}
            process = stack.enter_context(
                running(["-m", "tests.runtime.resources_child", "census"], log_path, env))
            ranks.append((process, log_path))
        results = [child_result(process, log_path, f"census rank {rank}")
                   for rank, (process, log_path) in enumerate(ranks)]
    for result in results:
        assert result["unregistered"] == [], result
        assert any("-io (actors.runtime.io.mailbox.Mailbox" in name
                   for name in result["registered"]), result
        assert any(name.startswith("pg-irecv ") for name in result["registered"]) == (
            result["rank"] == 1), result
        assert result["released"] and result["after"] == result["before"], result


IMPORTS = """\
import operator
import time
import actors
from actors.runtime import Actor, Kind
from actors.runtime.io.channel import Channel
from store import TCPStore
"""

LIVE_OBJECTS = """\
master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
client = TCPStore("127.0.0.1", master.port, timeout=10)
client.watch_key("key", lambda old, new: None)
client.set("key", "value")
actor = Actor("tcp://127.0.0.1:0", name="live", num_worker_threads=2).start()
channel = Channel(actor.address, connect_timeout=5.0)
channel.connect()
assert channel.call(Kind.PING, "ping", timeout=10) == "ping"
actors.init_rpc("w0", rank=0, world_size=1, init_method="tcp://127.0.0.1:{port}", timeout=10)
assert actors.rpc_sync("w0", operator.add, args=(1, 2)) == 3
print(time.monotonic(), flush=True)  # the script's last line: all that is left is the exit
"""


def timed_python(code: str):
    """(wall seconds, completed process) for ``python -c code``; killed after 30 s."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=QUIET,
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:  # subprocess.run has killed it
        pytest.fail(f"python -c did not finish within 30s:\n{code}")
    return time.monotonic() - started, done


def test_the_interpreter_exits_within_2_s_with_live_stores_actors_channels_and_an_rpc_world():
    """Ending a script that never closes anything (a store pair with a watch, an actor, a
    channel, an RPC world) exits cleanly and takes under 2 s more than just importing."""
    baseline, imported = timed_python(IMPORTS)
    assert imported.returncode == 0, imported.stderr
    elapsed, done = timed_python(IMPORTS + LIVE_OBJECTS.format(port=free_port()))
    finished = time.monotonic()
    assert done.returncode == 0, f"exit code {done.returncode}:\n{done.stderr[-3000:]}"
    exit_seconds = finished - float(done.stdout.split()[-1])
    assert elapsed - baseline < EXIT_LIMIT, (
        f"{elapsed:.2f}s against an import-only baseline of {baseline:.2f}s; the exit after "
        f"the last line took about {exit_seconds:.2f}s")
