"""Plain pyzmq programs (no actorgrad) that attached sockets talk to, run as spawned processes."""
import zmq


def pusher(endpoint, count, report):
    """PUSH `count` numbered messages to `endpoint`, then report "done"."""
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.connect(endpoint)
    for i in range(count):
        push.send(b"%d" % i)
    report.put("done")
    push.close(linger=10_000)


def flooder(endpoint, count, report):
    """Send without blocking until ZeroMQ pushes back: report how many went, then send
    the rest blocking (bounded) and report "done"."""
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.SNDHWM, 10)
    push.setsockopt(zmq.SNDTIMEO, 60_000)
    push.connect(endpoint)
    sent = 0
    while sent < count:
        try:
            push.send(b"%d" % sent, zmq.NOBLOCK)
        except zmq.Again:
            if sent > 0:
                break
            push.poll(100, zmq.POLLOUT)  # not connected yet
            continue
        sent += 1
    report.put(("pushed back after", sent))
    for i in range(sent, count):
        push.send(b"%d" % i)
    report.put("done")
    push.close(linger=10_000)


def publisher(endpoint, stop):
    """PUB on topics a and b, numbered, until `stop` is set."""
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.bind(endpoint)
    i = 0
    while not stop.is_set():
        for topic in (b"a", b"b"):
            pub.send_multipart([topic, b"%d" % i])
        i += 1
        stop.wait(0.002)
    pub.close(0)


def requester(endpoint, count, report):
    """A DEALER that sends `count` requests and reports the replies it got."""
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.connect(endpoint)
    for i in range(count):
        dealer.send(b"%d" % i)
    replies = []
    while len(replies) < count and dealer.poll(30_000):
        replies.append(dealer.recv())
    report.put(sorted(replies))
    dealer.close(0)


def server(endpoint, kind, count, report):
    """A bound ROUTER or PAIR: wait for a hello, send `count` messages to its sender,
    report the replies."""
    sock = zmq.Context.instance().socket(kind)
    sock.bind(endpoint)
    report.put("bound")
    if not sock.poll(30_000):
        report.put("no hello")
        return
    envelope = sock.recv_multipart()[:-1]  # a ROUTER's identity, or nothing
    for i in range(count):
        sock.send_multipart([*envelope, b"%d" % i])
    replies = []
    while len(replies) < count and sock.poll(30_000):
        replies.append(sock.recv_multipart()[-1])
    report.put(sorted(replies))
    sock.close(0)
