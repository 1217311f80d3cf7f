// ServerOptions::on_response over real HTTP: every response is reported with the pattern of the
// route it answered ("" when none) and its status, refusals before the handler included.
#include <mutex>
#include <utility>
#include <vector>

#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

class ResponseObserverTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerOptions options{.token = TokenCheck("token")};
    options.on_response = [this](std::string_view route, status code) {
      std::lock_guard lock(mutex_);
      seen_.emplace_back(std::string(route), code);
    };
    start_server(std::move(options), [](HttpServer& server) {
      server.add_route(verb::get, "/v1/jobs/{id}", [](const Request&) {
        return json_response({{"ok", true}});
      });
      server.add_route(verb::put, "/v1/jobs/{id}", [](const Request&) { return json_response({}); },
                       {.requires_token = true});
      server.add_async_route(verb::get, "/v1/later", [](const Request&, Responder respond) {
        respond(json_response({}, status::accepted));
      });
    });
  }

  std::vector<std::pair<std::string, status>> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

  std::mutex mutex_;
  std::vector<std::pair<std::string, status>> seen_;
};

TEST_F(ResponseObserverTest, ReportsTheRoutePatternAndStatusOfEveryResponse) {
  TestClient client = connect();
  EXPECT_EQ(client.send(verb::get, "/v1/jobs/7").result(), status::ok);
  EXPECT_EQ(client.send(verb::put, "/v1/jobs/7").result(), status::unauthorized);
  EXPECT_EQ(client.send(verb::delete_, "/v1/jobs/7").result(), status::method_not_allowed);
  EXPECT_EQ(client.send(verb::get, "/v1/nowhere").result(), status::not_found);
  EXPECT_EQ(client.send(verb::get, "/v1/later").result(), status::accepted);
  const std::vector<std::pair<std::string, status>> expected = {
      {"/v1/jobs/{id}", status::ok},
      {"/v1/jobs/{id}", status::unauthorized},
      {"/v1/jobs/{id}", status::method_not_allowed},
      {"", status::not_found},
      {"/v1/later", status::accepted},
  };
  EXPECT_EQ(seen(), expected);
}

}  // namespace
}  // namespace gradgate::http::testing
