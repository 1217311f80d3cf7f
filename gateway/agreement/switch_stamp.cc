#include "gateway/agreement/switch_stamp.h"

#include "gradgate/kernels/wire_io.h"

namespace gradgate::gateway {

using kernels::wire::load;
using kernels::wire::store;

void SwitchStamp::write(std::span<std::byte, kBytes> out) const {
  store<uint32_t>(out.data(), version);
  store<uint32_t>(out.data() + 4, held.oldest);
  store<uint32_t>(out.data() + 8, held.newest);
}

SwitchStamp SwitchStamp::read(std::span<const std::byte, kBytes> in) {
  return {load<uint32_t>(in.data()),
          {load<uint32_t>(in.data() + 4), load<uint32_t>(in.data() + 8)}};
}

}  // namespace gradgate::gateway
