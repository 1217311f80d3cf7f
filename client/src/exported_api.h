// Includes the C API with default visibility: the library is built with hidden visibility, so
// only the gg_ functions declared in gradgate/client.h are exported.
#pragma once

#pragma GCC visibility push(default)
#include "gradgate/client.h"
#pragma GCC visibility pop
