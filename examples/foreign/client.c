/* A C client of actorgrad: store set/get and a named call with a float32 array.
 *
 * It speaks the wire protocol of docs/PROTOCOL.md with libzmq alone: a DEALER
 * socket, a 16-byte header, a JSON body and raw buffer frames. No pickle is
 * involved, so it works against a worker and store in safe mode (--no-pickle).
 *
 * Build:  gcc -O2 -o client examples/foreign/client.c -lzmq
 * Run:    ./client 127.0.0.1 29500     (the host and port of the job's store)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

enum { HEADER_SIZE = 16, MAX_FRAMES = 8, TIMEOUT_MS = 10000 };
enum { FLAG_RESPONSE = 0x01, FLAG_ERROR = 0x02, FLAG_JSON = 0x08 };
enum { STORE_SET = 0x0100, STORE_GET = 0x0101, RPC_CALL_NAMED = 0x0204 };

typedef struct {
    int count;
    zmq_msg_t frames[MAX_FRAMES];
} reply_t;

static void fail(const char *what) {
    fprintf(stderr, "client: %s\n", what);
    exit(1);
}

static void pack_header(uint8_t out[HEADER_SIZE], uint16_t kind, uint16_t nbufs,
                        uint64_t req_id) {
    out[0] = 'A';
    out[1] = 'G';
    out[2] = 1;          /* protocol version */
    out[3] = FLAG_JSON;  /* the body is JSON, and the reply will be too */
    out[4] = kind & 0xff;
    out[5] = kind >> 8;
    out[6] = nbufs & 0xff;
    out[7] = nbufs >> 8;
    for (int i = 0; i < 8; i++) out[8 + i] = (req_id >> (8 * i)) & 0xff;
}

/* Send [header, body, buffers...] and receive the reply's frames. */
static void request(void *sock, uint16_t kind, uint64_t req_id, const char *body,
                    const void *buf, size_t buf_len, reply_t *reply) {
    uint8_t header[HEADER_SIZE];
    int nbufs = buf != NULL;
    pack_header(header, kind, (uint16_t)nbufs, req_id);
    if (zmq_send(sock, header, HEADER_SIZE, ZMQ_SNDMORE) < 0) fail("send header");
    if (zmq_send(sock, body, strlen(body), nbufs ? ZMQ_SNDMORE : 0) < 0) fail("send body");
    if (nbufs && zmq_send(sock, buf, buf_len, 0) < 0) fail("send buffer");

    reply->count = 0;
    int more = 1;
    while (more) {
        if (reply->count == MAX_FRAMES) fail("reply has too many frames");
        zmq_msg_t *frame = &reply->frames[reply->count++];
        zmq_msg_init(frame);
        if (zmq_msg_recv(frame, sock, 0) < 0) fail("no reply within the timeout");
        more = zmq_msg_more(frame);
    }
    if (reply->count < 2 || zmq_msg_size(&reply->frames[0]) != HEADER_SIZE)
        fail("malformed reply");
    const uint8_t *h = zmq_msg_data(&reply->frames[0]);
    uint64_t echoed = 0;
    for (int i = 0; i < 8; i++) echoed |= (uint64_t)h[8 + i] << (8 * i);
    if (h[0] != 'A' || h[1] != 'G' || !(h[3] & FLAG_RESPONSE) || echoed != req_id)
        fail("reply does not answer the request");
}

static int is_error(reply_t *reply) {
    return ((const uint8_t *)zmq_msg_data(&reply->frames[0]))[3] & FLAG_ERROR;
}

/* The reply's body as a NUL-terminated string in `out`. */
static const char *body_text(reply_t *reply, char *out, size_t size) {
    size_t n = zmq_msg_size(&reply->frames[1]);
    if (n >= size) n = size - 1;
    memcpy(out, zmq_msg_data(&reply->frames[1]), n);
    out[n] = '\0';
    return out;
}

static void release(reply_t *reply) {
    for (int i = 0; i < reply->count; i++) zmq_msg_close(&reply->frames[i]);
    reply->count = 0;
}

static void *connect_dealer(void *ctx, const char *endpoint) {
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int timeout = TIMEOUT_MS, linger = 0;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(sock, endpoint) != 0) fail("connect");
    return sock;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s STORE_HOST STORE_PORT\n", argv[0]);
        return 2;
    }
    char endpoint[256], text[4096];
    reply_t reply;
    uint64_t req_id = 0;
    void *ctx = zmq_ctx_new();

    /* 1. The store: set a key, read it back, and find the worker's mailbox. */
    snprintf(endpoint, sizeof endpoint, "tcp://%s:%s", argv[1], argv[2]);
    void *store = connect_dealer(ctx, endpoint);
    const char *greeting = "hello from C";
    request(store, STORE_SET, ++req_id, "{\"key\":\"foreign/c\",\"value\":{\"$buf\":0}}",
            greeting, strlen(greeting), &reply);
    if (is_error(&reply)) fail(body_text(&reply, text, sizeof text));
    release(&reply);

    request(store, STORE_GET, ++req_id, "{\"key\":\"foreign/c\",\"timeout\":5}", NULL, 0, &reply);
    if (is_error(&reply) || reply.count != 3 ||
        zmq_msg_size(&reply.frames[2]) != strlen(greeting) ||
        memcmp(zmq_msg_data(&reply.frames[2]), greeting, strlen(greeting)) != 0)
        fail("store get did not return what was set");
    printf("store: set and got back \"%s\"\n", greeting);
    release(&reply);

    request(store, STORE_GET, ++req_id, "{\"key\":\"rpc/addresses/0\",\"timeout\":30}", NULL, 0,
            &reply);
    if (is_error(&reply) || reply.count != 3) fail("no worker address in the store");
    size_t n = zmq_msg_size(&reply.frames[2]);
    if (n >= sizeof endpoint) fail("worker address too long");
    memcpy(endpoint, zmq_msg_data(&reply.frames[2]), n);
    endpoint[n] = '\0';
    release(&reply);
    printf("worker: %s\n", endpoint);

    /* 2. A named call: scale(values, 2.5) with a float32 array as a raw frame. */
    void *worker = connect_dealer(ctx, endpoint);
    float values[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.5f};
    request(worker, RPC_CALL_NAMED, ++req_id,
            "{\"fn\":\"scale\",\"args\":[{\"$array\":0,\"dtype\":\"<f4\",\"shape\":[5]},2.5],"
            "\"kwargs\":{}}",
            values, sizeof values, &reply);
    if (is_error(&reply)) fail(body_text(&reply, text, sizeof text));
    if (reply.count != 3 || zmq_msg_size(&reply.frames[2]) != sizeof values)
        fail("scale: expected one float32 frame of 5 values");
    printf("scale: reply body %s\n", body_text(&reply, text, sizeof text));
    const float *scaled = zmq_msg_data(&reply.frames[2]);
    printf("scale:");
    for (int i = 0; i < 5; i++) {
        printf(" %g", scaled[i]);
        if (scaled[i] != values[i] * 2.5f) fail("scale: wrong value");
    }
    printf("\n");
    release(&reply);

    /* 3. An unknown name: an error reply that says what is exposed. */
    request(worker, RPC_CALL_NAMED, ++req_id, "{\"fn\":\"nope\",\"args\":[]}", NULL, 0, &reply);
    if (!is_error(&reply)) fail("calling an unknown name did not fail");
    printf("unknown name: error reply %.120s...\n", body_text(&reply, text, sizeof text));
    release(&reply);

    zmq_close(worker);
    zmq_close(store);
    zmq_ctx_term(ctx);
    printf("C client: all checks passed\n");
    return 0;
}
