"""Processes with an actor that pushes on an attached socket, then stops or just exits."""
import zmq

from actors.runtime import Actor

running = []  # actors that live until the interpreter exits, as a script's would


def push_then_end(endpoint, count, size, ending, report):
    """Send `count` messages of `size` bytes through an attached PUSH to `endpoint`,
    then `ending`: "stop" the actor, or "exit" (the interpreter's normal exit)."""
    actor = Actor(None, name="pusher").start()
    push = actor.attach(endpoint, socket_type=zmq.PUSH)
    payload = b"x" * size
    for i in range(count):
        push.send([b"%d" % i, payload])
    if ending == "stop":
        actor.stop()
    else:
        running.append(actor)
    report.put("sent")
