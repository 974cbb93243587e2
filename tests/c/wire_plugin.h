/* An external NRI plugin written in C against the wire protocol itself:
 * the trunk multiplexer (8-byte frames: conn id, length) carrying two
 * ttrpc sessions (10-byte headers), protobuf bodies from pb.h. It plays
 * an *old* plugin whose stub has no RPC for some events, so the runtime
 * answers with the deprecated StateChange, which no Rust or Go stub of
 * this project can be made to do. It runs on a thread of its own. */
#ifndef NRI_C_TESTS_WIRE_PLUGIN_H
#define NRI_C_TESTS_WIRE_PLUGIN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct wire_plugin {
    /* Set before wire_plugin_start. */
    const char *name, *idx;
    int32_t events;             /* subscription sent in ConfigureResponse */
    uint32_t unimplemented;     /* EVENT_BIT()s of RPCs answered Unimplemented */
    /* Seen, read after wire_plugin_stop (or atomically). */
    atomic_int registered;      /* RegisterPlugin answered without error */
    atomic_int state_changes;   /* StateChange requests */
    atomic_int requests;        /* all requests */
    atomic_int protocol_errors;
    /* Private. */
    int fd;
    int running;                /* started and not yet stopped */
    pthread_t thread;
} wire_plugin;

/* Connects to the runtime's socket, registers, and serves until stopped or
 * disconnected; 0 on success. */
int wire_plugin_start(wire_plugin *p, const char *socket_path);
/* Hangs up and joins the plugin's thread; does nothing for a plugin that
 * is not running, so it may be called again, or on a zeroed one. */
void wire_plugin_stop(wire_plugin *p);
/* wire_plugin_stop for fixture_keep (harness.h). */
void wire_plugin_release(void *p);

#endif
