// include/nri.h from C++: twice (include guard), inside no extern "C" of
// ours (the header brings its own), with the enums as real C++ enums with
// a uint32_t underlying type, under -std=c++17 -Wall -Wextra -Wpedantic
// -Werror.
#include "nri.h"
#include "nri.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
}

static_assert(std::is_same<std::underlying_type<nri_status>::type, uint32_t>::value,
              "nri_status is 32 bits");
static_assert(std::is_same<std::underlying_type<nri_builtin_op>::type, uint32_t>::value,
              "nri_builtin_op is 32 bits");
static_assert(std::is_standard_layout<nri_buffer>::value, "nri_buffer is a C struct");
static_assert(sizeof(nri_callbacks) == 4 * sizeof(void *), "nri_callbacks layout");

static void cxx_calls_the_library(void **)
{
    assert_string_equal(nri_version(), NRI_RS_VERSION);
    nri_status st = nri_error_status(nullptr);
    assert_int_equal(st, NRI_STATUS_INVALID_ARGUMENT);
    assert_string_equal(nri_status_name(NRI_STATUS_OK), "ok");

    nri_options *opts = nri_options_new();
    nri_error *err = nullptr;
    st = nri_options_set_socket_path(opts, "", &err);
    assert_int_equal(st, NRI_STATUS_INVALID_ARGUMENT);
    assert_non_null(err);
    assert_non_null(std::strstr(nri_error_message(err), "empty"));
    nri_error_free(err);
    nri_options_free(opts);
}

static void cxx_callbacks_are_plain_functions(void **)
{
    // Captureless lambdas convert to the header's function pointer types.
    nri_callbacks cbs = {
        [](void *, nri_sync_cb *, nri_reply *) {},
        [](void *, const uint8_t *, size_t, nri_reply *) {},
        nullptr,
        nullptr,
    };
    nri_adaptation *a = nullptr;
    nri_error *err = nullptr;
    assert_int_equal(nri_adaptation_new("cxx", "1", &cbs, nullptr, &a, &err), NRI_STATUS_OK);
    assert_non_null(a);
    nri_adaptation_free(a);
}

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cxx_calls_the_library),
        cmocka_unit_test(cxx_callbacks_are_plain_functions),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
