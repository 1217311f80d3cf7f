#include "common/net/listener.h"

#include "common/net/host_name.h"

namespace gradgate::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

Result<tcp::acceptor> listen_tcp(asio::io_context& io, const std::string& host, uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  if (!is_host(host)) {  // refused before DNS is asked about it
    return Status(ErrorCode::kInvalidArgument,
                  "listen address '" + host + "' is not an IPv4 address or host name");
  }
  error_code error;
  tcp::resolver resolver(io);
  const auto addresses =
      resolver.resolve(tcp::v4(), host, std::to_string(port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, error);
  if (error || addresses.empty()) {
    return Status(ErrorCode::kUnavailable, "cannot resolve " + where + " to an IPv4 address: " +
                                               (error ? error.message() : "no address"));
  }
  const tcp::endpoint endpoint = addresses.begin()->endpoint();
  const auto fail = [&](const char* step) {
    return Status(ErrorCode::kUnavailable, std::string("cannot ") + step + " " + where + " (" +
                                               endpoint.address().to_string() +
                                               "): " + error.message());
  };
  tcp::acceptor acceptor(io);
  acceptor.open(endpoint.protocol(), error);
  if (error) return fail("open a socket for");
  acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (error) return fail("set SO_REUSEADDR for");
  acceptor.bind(endpoint, error);
  if (error) return fail("bind to");
  acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) return fail("listen on");
  return acceptor;
}

}  // namespace gradgate::net
