// The twin of collective_includes_tcp_transport.cc with an include the collective may make.
#include "gateway/collective/collective_engine.h"
#include "gateway/transport/transport.h"
