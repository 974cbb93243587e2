#include "wire_plugin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nri_msgs.h"
#include "pb.h"

enum {
    PLUGIN_SERVICE_CONN = 1,  /* the plugin serves, the runtime calls */
    RUNTIME_SERVICE_CONN = 2, /* the runtime serves, the plugin calls */
    TTRPC_REQUEST = 1, TTRPC_RESPONSE = 2,
    /* ttrpc Request, Response, Status */
    F_TREQ_SERVICE = 1, F_TREQ_METHOD = 2, F_TREQ_PAYLOAD = 3,
    F_TRSP_STATUS = 1, F_TRSP_PAYLOAD = 2, F_STATUS_CODE = 1, F_STATUS_MESSAGE = 2,
    CODE_UNIMPLEMENTED = 12,
};

static const char *const EVENT_METHODS[] = {
    NULL, "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer",
    "PostCreateContainer", "StartContainer", "PostStartContainer", "UpdateContainer",
    "PostUpdateContainer", "StopContainer", "RemoveContainer", "UpdatePodSandbox",
    "PostUpdatePodSandbox", "ValidateContainerAdjustment",
};

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r, n -= (size_t)r;
    }
    return 0;
}

/* One ttrpc message in one mux frame (it is small). */
static int send_ttrpc(int fd, uint32_t conn, uint32_t stream, uint8_t type, const pb *body)
{
    uint8_t hdr[18];
    put_be32(hdr, conn);
    put_be32(hdr + 4, (uint32_t)(10 + body->len));
    put_be32(hdr + 8, (uint32_t)body->len);
    put_be32(hdr + 12, stream);
    hdr[16] = type;
    hdr[17] = 0;
    pb frame = { 0 };
    pb_raw(&frame, hdr, sizeof hdr);
    pb_raw(&frame, body->data, body->len);
    int rc = write_all(fd, frame.data, frame.len);
    pb_free(&frame);
    return rc;
}

/* The event number of a per-event RPC method, or 0. */
static int event_of(const char *method)
{
    for (int e = 1; e < (int)(sizeof EVENT_METHODS / sizeof *EVENT_METHODS); e++)
        if (strcmp(method, EVENT_METHODS[e]) == 0)
            return e;
    return 0;
}

/* Answers one request the runtime sent on the plugin service. */
static int serve(wire_plugin *p, uint32_t stream, const uint8_t *msg, size_t len)
{
    char method[64] = "";
    pb rsp = { 0 }, payload = { 0 }, status = { 0 };
    atomic_fetch_add(&p->requests, 1);
    if (!pb_get_string(msg, len, F_TREQ_METHOD, method, sizeof method))
        return -1;
    int event = event_of(method);
    if (strcmp(method, "Configure") == 0) {
        pb_varint(&payload, F_CONF_RSP_EVENTS, (uint64_t)(uint32_t)p->events);
    } else if (strcmp(method, "StateChange") == 0) {
        atomic_fetch_add(&p->state_changes, 1);
    } else if (event && (p->unimplemented & EVENT_BIT(event))) {
        /* What a stub without this RPC answers. */
        pb_varint(&status, F_STATUS_CODE, CODE_UNIMPLEMENTED);
        pb_string(&status, F_STATUS_MESSAGE, method);
        pb_message(&rsp, F_TRSP_STATUS, &status);
    }
    /* Synchronize, Shutdown and implemented events: empty replies. */
    if (!rsp.len)
        pb_message(&rsp, F_TRSP_PAYLOAD, &payload);
    int rc = send_ttrpc(p->fd, PLUGIN_SERVICE_CONN, stream, TTRPC_RESPONSE, &rsp);
    pb_free(&rsp);
    pb_free(&payload);
    return rc;
}

/* Handles every complete ttrpc message buffered for `conn`. */
static int drain(wire_plugin *p, uint32_t conn, pb *buf)
{
    size_t off = 0;
    while (buf->len - off >= 10) {
        const uint8_t *h = buf->data + off;
        uint32_t len = get_be32(h), stream = get_be32(h + 4);
        uint8_t type = h[8];
        if (buf->len - off - 10 < len)
            break;
        const uint8_t *msg = h + 10;
        if (conn == PLUGIN_SERVICE_CONN && type == TTRPC_REQUEST) {
            if (serve(p, stream, msg, len) < 0)
                return -1;
        } else if (conn == RUNTIME_SERVICE_CONN && type == TTRPC_RESPONSE) {
            pb_field status, code;
            if (!pb_get(msg, len, F_TRSP_STATUS, 0, &status)
                || !pb_get(status.data, status.len, F_STATUS_CODE, 0, &code) || code.varint == 0)
                atomic_store(&p->registered, 1);
        } else {
            atomic_fetch_add(&p->protocol_errors, 1);
        }
        off += 10 + len;
    }
    memmove(buf->data, buf->data + off, buf->len - off);
    buf->len -= off;
    return 0;
}

static void *run(void *arg)
{
    wire_plugin *p = arg;
    pb conns[3] = { { 0 }, { 0 }, { 0 } };
    uint8_t hdr[8];
    while (read_all(p->fd, hdr, sizeof hdr) == 0) {
        uint32_t conn = get_be32(hdr), len = get_be32(hdr + 4);
        uint8_t *data = malloc(len ? len : 1);
        if (!data || read_all(p->fd, data, len) < 0) {
            free(data);
            break;
        }
        if (conn == PLUGIN_SERVICE_CONN || conn == RUNTIME_SERVICE_CONN) {
            pb_raw(&conns[conn], data, len);
            if (drain(p, conn, &conns[conn]) < 0)
                atomic_fetch_add(&p->protocol_errors, 1);
        } else {
            atomic_fetch_add(&p->protocol_errors, 1);
        }
        free(data);
    }
    for (int i = 0; i < 3; i++)
        pb_free(&conns[i]);
    return NULL;
}

int wire_plugin_start(wire_plugin *p, const char *socket_path)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(socket_path) >= sizeof addr.sun_path)
        return -1;
    strcpy(addr.sun_path, socket_path);
    p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->fd < 0)
        return -1;
    if (connect(p->fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        goto fail;

    /* RegisterPlugin, the first call of every external plugin. */
    pb reg = { 0 }, req = { 0 };
    pb_string(&reg, 1, p->name); /* RegisterPluginRequest.plugin_name */
    pb_string(&reg, 2, p->idx);  /* RegisterPluginRequest.plugin_idx */
    pb_string(&req, F_TREQ_SERVICE, "nri.pkg.api.v1alpha1.Runtime");
    pb_string(&req, F_TREQ_METHOD, "RegisterPlugin");
    pb_message(&req, F_TREQ_PAYLOAD, &reg);
    int rc = send_ttrpc(p->fd, RUNTIME_SERVICE_CONN, 1, TTRPC_REQUEST, &req);
    pb_free(&req);
    if (rc < 0 || pthread_create(&p->thread, NULL, run, p) != 0)
        goto fail;
    p->running = 1;
    return 0;
fail:
    close(p->fd);
    p->fd = -1;
    return -1;
}

void wire_plugin_stop(wire_plugin *p)
{
    if (!p->running)
        return;
    shutdown(p->fd, SHUT_RDWR);
    pthread_join(p->thread, NULL);
    close(p->fd);
    p->fd = -1;
    p->running = 0;
}

void wire_plugin_release(void *p)
{
    wire_plugin_stop(p);
}
