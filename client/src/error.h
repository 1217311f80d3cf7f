// The calling thread's last error message, and the function every failing gg_ call returns through.
#pragma once

#include <string>

#include "exported_api.h"

namespace gradgate::client_impl {

/// Records `message` as the calling thread's last error and returns `status`.
gg_status fail(gg_status status, std::string message);

/// `name` quoted for an error message, cut to a readable length.
std::string quoted(const char* name);

}  // namespace gradgate::client_impl
