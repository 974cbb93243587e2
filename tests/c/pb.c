#include "pb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pb_free(pb *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void pb_raw(pb *b, const void *data, size_t len)
{
    if (len == 0)
        return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + len)
            cap *= 2;
        uint8_t *p = realloc(b->data, cap);
        if (!p) {
            fprintf(stderr, "pb: out of memory\n");
            abort();
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

static void put_varint(pb *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    pb_raw(b, tmp, n);
}

void pb_varint(pb *b, uint32_t field, uint64_t v)
{
    put_varint(b, (uint64_t)field << 3 | 0);
    put_varint(b, v);
}

void pb_bytes(pb *b, uint32_t field, const uint8_t *data, size_t len)
{
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, len);
    pb_raw(b, data, len);
}

void pb_string(pb *b, uint32_t field, const char *s)
{
    pb_bytes(b, field, (const uint8_t *)s, strlen(s));
}

void pb_message(pb *b, uint32_t field, pb *sub)
{
    pb_bytes(b, field, sub->data, sub->len);
    pb_free(sub);
}

pb_reader pb_read(const uint8_t *data, size_t len)
{
    pb_reader r = { data, data ? data + len : data };
    return r;
}

static int get_varint(pb_reader *r, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return -1;
        uint8_t byte = *r->p++;
        *v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return 1;
    }
    return -1;
}

int pb_next(pb_reader *r, pb_field *f)
{
    if (r->p >= r->end)
        return 0;
    uint64_t key;
    if (get_varint(r, &key) < 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
        return -1;
    memset(f, 0, sizeof *f);
    f->num = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    switch (f->wire) {
    case 0:
        return get_varint(r, &f->varint);
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            return -1;
        for (size_t i = 0; i < n; i++)
            f->varint |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        return 1;
    }
    case 2: {
        uint64_t n;
        if (get_varint(r, &n) < 0 || n > (uint64_t)(r->end - r->p))
            return -1;
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return 1;
    }
    default:
        return -1;
    }
}

int pb_get(const uint8_t *data, size_t len, uint32_t field, size_t nth, pb_field *out)
{
    pb_reader r = pb_read(data, len);
    pb_field f;
    int rc;
    while ((rc = pb_next(&r, &f)) == 1) {
        if (f.num == field && nth-- == 0) {
            *out = f;
            return 1;
        }
    }
    return 0;
}

int pb_count(const uint8_t *data, size_t len, uint32_t field)
{
    pb_reader r = pb_read(data, len);
    pb_field f;
    int rc, n = 0;
    while ((rc = pb_next(&r, &f)) == 1)
        n += f.num == field;
    return rc < 0 ? -1 : n;
}

int pb_path(const uint8_t *data, size_t len, const uint32_t *path, size_t depth,
            const uint8_t **out, size_t *out_len)
{
    for (size_t i = 0; i < depth; i++) {
        pb_field f;
        if (!pb_get(data, len, path[i], 0, &f) || f.wire != 2)
            return 0;
        data = f.data;
        len = f.len;
    }
    *out = data;
    *out_len = len;
    return 1;
}

int pb_get_string(const uint8_t *data, size_t len, uint32_t field, char *buf, size_t cap)
{
    pb_field f;
    if (cap == 0 || !pb_get(data, len, field, 0, &f) || f.wire != 2 || f.len >= cap)
        return 0;
    memcpy(buf, f.data, f.len);
    buf[f.len] = '\0';
    return 1;
}
