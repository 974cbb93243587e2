/* The second compilation unit of test_header: includes nri.h twice again
 * and calls into the library, so a header that defined anything (rather
 * than declaring it) would fail to link. */
#include "nri.h"
#include "nri.h"

const char *header_b_version(void);
nri_status header_b_status(void);
size_t header_b_sizes(void);

const char *header_b_version(void)
{
    return nri_version();
}

nri_status header_b_status(void)
{
    return nri_error_status(NULL);
}

size_t header_b_sizes(void)
{
    return sizeof(nri_buffer) + sizeof(nri_callbacks) + sizeof(nri_builtin_plugin)
           + sizeof(nri_metrics) + sizeof(nri_status) + sizeof(nri_log_level)
           + sizeof(nri_builtin_op) + sizeof(nri_deprecation);
}
