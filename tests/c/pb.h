/* A tiny protobuf writer and reader: just enough wire format (varints and
 * length-delimited fields) to build NRI requests in C and pick fields out
 * of the library's replies, with no protobuf library. Field numbers come
 * from crates/nri-api/proto/nri.proto; nri_msgs.h names the ones the tests use. */
#ifndef NRI_C_TESTS_PB_H
#define NRI_C_TESTS_PB_H

#include <stddef.h>
#include <stdint.h>

/* A growable buffer of encoded fields. Zero-initialised is empty. */
typedef struct pb {
    uint8_t *data;
    size_t len;
    size_t cap;
} pb;

void pb_free(pb *b);
void pb_varint(pb *b, uint32_t field, uint64_t v);
void pb_string(pb *b, uint32_t field, const char *s);
void pb_bytes(pb *b, uint32_t field, const uint8_t *data, size_t len);
/* Embeds `sub` as a nested message and frees it. */
void pb_message(pb *b, uint32_t field, pb *sub);
/* Appends raw bytes (for framing headers in the wire peer). */
void pb_raw(pb *b, const void *data, size_t len);

/* One field read from an encoded message. */
typedef struct pb_field {
    uint32_t num;
    uint32_t wire;          /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
    uint64_t varint;        /* wire 0 */
    const uint8_t *data;    /* wire 2 */
    size_t len;             /* wire 2 */
} pb_field;

typedef struct pb_reader {
    const uint8_t *p;
    const uint8_t *end;
} pb_reader;

pb_reader pb_read(const uint8_t *data, size_t len);
/* 1: `*f` holds the next field; 0: end of message; -1: malformed. */
int pb_next(pb_reader *r, pb_field *f);
/* The `nth` (0-based) occurrence of `field`, 1 if found, 0 if not. */
int pb_get(const uint8_t *data, size_t len, uint32_t field, size_t nth, pb_field *out);
/* The number of occurrences of `field` (-1 if malformed). */
int pb_count(const uint8_t *data, size_t len, uint32_t field);
/* Follows a path of nested message fields (first occurrence of each) and
 * returns the innermost one's bytes; 1 if every step was found. */
int pb_path(const uint8_t *data, size_t len, const uint32_t *path, size_t depth,
            const uint8_t **out, size_t *out_len);
/* Copies string field `field` into `buf` (NUL-terminated); 1 if found. */
int pb_get_string(const uint8_t *data, size_t len, uint32_t field, char *buf, size_t cap);

#endif
