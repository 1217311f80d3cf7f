// A stray include on purpose: the collective links the Transport interface, not its TCP
// implementation, so this must not compile (tests/layering/CMakeLists.txt).
#include "gateway/collective/collective_engine.h"
#include "gateway/transport/tcp_transport.h"
