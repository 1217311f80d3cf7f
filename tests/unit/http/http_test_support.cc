#include "http_test_support.h"

#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

namespace gradgate::http::testing {

TestClient::TestClient(uint16_t port) : stream_(io_) {
  const boost::asio::ip::tcp::endpoint server(boost::asio::ip::make_address("127.0.0.1"), port);
  error_code error;
  stream_.expires_after(kClientTimeout);
  stream_.async_connect(server, [&](const error_code& result) { error = result; });
  run();
  EXPECT_FALSE(error) << "connect: " << error.message();
}

Reply TestClient::send(verb method, std::string target, std::string body, const Headers& headers) {
  ClientRequest request(method, target, 11);
  request.set(beast_http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = std::move(body);
  request.prepare_payload();
  error_code error = write(request);
  EXPECT_FALSE(error) << "write: " << error.message();
  Reply reply;
  error = read(reply, method == verb::head);
  EXPECT_FALSE(error) << "read: " << error.message();
  return reply;
}

Reply TestClient::send_json(verb method, std::string target, std::string json, Headers headers) {
  headers.emplace_back(beast_http::field::content_type, "application/json");
  return send(method, std::move(target), std::move(json), headers);
}

template <typename Start>
error_code TestClient::bounded(Start start) {
  error_code error;
  stream_.expires_after(kClientTimeout);
  start([&](const error_code& result, std::size_t) { error = result; });
  run();
  return error;
}

error_code TestClient::write_raw(std::string_view bytes) {
  return bounded([&](auto done) {
    boost::asio::async_write(stream_, boost::asio::buffer(bytes.data(), bytes.size()), done);
  });
}

error_code TestClient::write(ClientRequest& request) {
  return bounded([&](auto done) { beast_http::async_write(stream_, request, done); });
}

error_code TestClient::read(Reply& reply, bool header_only) {
  beast_http::response_parser<beast_http::string_body> parser;
  parser.skip(header_only);  // the answer to HEAD: a Content-Length but no content
  const error_code error =
      bounded([&](auto done) { beast_http::async_read(stream_, buffer_, parser, done); });
  reply = parser.release();
  return error;
}

void TestClient::run() {
  io_.restart();
  io_.run();
}

void expect_problem(const Reply& reply, status code, std::string_view field,
                    std::string_view detail_part) {
  EXPECT_EQ(reply.result(), code) << reply.body();
  EXPECT_EQ(reply[beast_http::field::content_type], kProblemContentType);
  const nlohmann::json body = nlohmann::json::parse(reply.body(), nullptr, false);
  ASSERT_TRUE(body.is_object()) << reply.body();
  EXPECT_EQ(body.value("type", ""), "about:blank");
  EXPECT_EQ(body.value("status", 0), static_cast<int>(code));
  EXPECT_EQ(body.value("title", ""), beast_http::obsolete_reason(code));
  const std::string detail = body.value("detail", "");
  EXPECT_FALSE(detail.empty());
  EXPECT_NE(detail.find(detail_part), std::string::npos) << detail;
  if (field.empty()) {
    EXPECT_FALSE(body.contains("field")) << reply.body();
  } else {
    EXPECT_EQ(body.value("field", ""), field) << reply.body();
  }
}

}  // namespace gradgate::http::testing
