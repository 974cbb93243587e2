/* The version the library reports, the header's version macros and
 * Cargo.toml agree (rustls-ffi's rustls_header_version test, from C); and
 * what the default build has. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NRI_CARGO_TOML
#error "build with -DNRI_CARGO_TOML=\"/path/to/Cargo.toml\""
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

/* The `version` of the [workspace.package] table of the workspace's Cargo.toml
 * (every nri-rs crate takes its version from there). */
static void cargo_version(char *out, size_t cap)
{
    char *toml = read_file(NRI_CARGO_TOML);
    assert_non_null(toml);
    char *pkg = strstr(toml, "[workspace.package]");
    assert_non_null(pkg);
    char *line = strstr(pkg, "\nversion = \"");
    assert_non_null(line);
    line += strlen("\nversion = \"");
    char *end = strchr(line, '"');
    assert_non_null(end);
    assert_true((size_t)(end - line) < cap);
    memcpy(out, line, (size_t)(end - line));
    out[end - line] = '\0';
    free(toml);
}

static void library_version_is_cargo_version(void **state)
{
    (void)state;
    char cargo[64];
    cargo_version(cargo, sizeof cargo);
    const char *v = nri_version();
    assert_non_null(v);
    assert_string_equal(v, cargo);
    /* Static: the same string every time. */
    assert_ptr_equal(nri_version(), v);
}

static void header_macros_are_cargo_version(void **state)
{
    (void)state;
    char cargo[64], parts[64];
    cargo_version(cargo, sizeof cargo);
    assert_string_equal(NRI_RS_VERSION, cargo);
    snprintf(parts, sizeof parts, "%d.%d.%d", NRI_RS_VERSION_MAJOR, NRI_RS_VERSION_MINOR,
             NRI_RS_VERSION_PATCH);
    assert_string_equal(parts, cargo);
    /* The macros are plain integer literals, usable in #if. */
#if NRI_RS_VERSION_MAJOR < 0 || NRI_RS_VERSION_MINOR < 0 || NRI_RS_VERSION_PATCH < 0
#error "negative version component"
#endif
    assert_string_equal(STR(NRI_RS_VERSION_MAJOR), strtok(cargo, "."));
}

static void api_version_names_an_upstream_release(void **state)
{
    (void)state;
    const char *v = nri_api_version();
    assert_non_null(v);
    unsigned major, minor, patch;
    char tail;
    assert_int_equal(sscanf(v, "v%u.%u.%u%c", &major, &minor, &patch, &tail), 3);
    assert_int_equal(major, 0);
    assert_true(minor >= 12);
    assert_ptr_equal(nri_api_version(), v);
}

/* Whether the library compiles WASM plugins itself is its build's choice
 * (the compiled-wasm feature, off by default); make test-c says which
 * build it links in NRI_COMPILED_WASM ("1" with the feature). */
static void wasm_support_is_the_builds(void **state)
{
    (void)state;
    const char *compiled = getenv("NRI_COMPILED_WASM");
    assert_int_equal(nri_wasm_supported(), compiled != NULL && strcmp(compiled, "1") == 0);
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        TEST(library_version_is_cargo_version),
        TEST(header_macros_are_cargo_version),
        TEST(api_version_names_an_upstream_release),
        TEST(wasm_support_is_the_builds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
