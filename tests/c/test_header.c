/* include/nri.h is a well-behaved header: it compiles on its own (it is
 * the first include here), twice in one unit (include guard), and in two
 * units of one program (no definitions, only declarations), all under
 * -std=c11 -Wall -Wextra -Wpedantic -Werror. test_header_cxx.cc does the
 * same from C++ (cbindgen's cpp_compat). */
#include "nri.h"
#include "nri.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* From header_b.c, the other unit. */
const char *header_b_version(void);
nri_status header_b_status(void);
size_t header_b_sizes(void);

static size_t sizes(void)
{
    return sizeof(nri_buffer) + sizeof(nri_callbacks) + sizeof(nri_builtin_plugin)
           + sizeof(nri_metrics) + sizeof(nri_status) + sizeof(nri_log_level)
           + sizeof(nri_builtin_op) + sizeof(nri_deprecation);
}

static void both_units_see_one_library(void **state)
{
    (void)state;
    assert_ptr_equal(header_b_version(), nri_version());
    assert_string_equal(header_b_version(), NRI_RS_VERSION);
    assert_int_equal(header_b_status(), NRI_STATUS_INVALID_ARGUMENT);
    /* Same layouts in both units. */
    assert_int_equal(header_b_sizes(), sizes());
}

static void c_types_have_the_documented_abi(void **state)
{
    (void)state;
    /* Before C23 the enums are uint32_t typedefs with #defined-like
     * constants; the ABI is 32 bits either way. */
    assert_int_equal(sizeof(nri_status), 4);
    assert_int_equal(sizeof(nri_log_level), 4);
    assert_int_equal(sizeof(nri_builtin_op), 4);
    assert_int_equal(sizeof(nri_deprecation), 4);
    assert_int_equal(sizeof(nri_buffer), sizeof(void *) + sizeof(size_t));
    assert_int_equal(offsetof(nri_buffer, len), sizeof(void *));
    assert_int_equal(offsetof(nri_callbacks, free_user_data), 3 * sizeof(void *));
    assert_int_equal(NRI_STATUS_PANIC, 9);
    assert_int_equal(NRI_BUILTIN_OP_SYNCHRONIZE, 33);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(both_units_see_one_library),
        cmocka_unit_test(c_types_have_the_documented_abi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
