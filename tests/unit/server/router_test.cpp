// The route table (server/router.h): the key before the method, the method before the handler,
// and each route's plain answers, without a socket.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/router.h"

namespace parlance::server {
namespace {

namespace http = boost::beast::http;

HttpRequest request(http::verb verb, const std::string& target) {
    HttpRequest r{verb, target, 11};
    r.set(http::field::host, "localhost");
    return r;
}

int status_of(ServerState& s, const HttpRequest& r) {
    try {
        RouteReply reply = route_request(s, find_route(std::string(r.target()), false), r);
        if (auto* plain = std::get_if<PlainReply>(&reply)) return plain->status;
        return 0;  // not a plain answer
    } catch (const ApiError& e) {
        return e.status;
    }
}

TEST(Router, PlainRoutesAnswerWithoutAModel) {
    ServerOptions o;
    ServerState s(o, Logger::null());
    EXPECT_EQ(status_of(s, request(http::verb::get, "/health")), 503) << "no speech model yet";
    EXPECT_EQ(status_of(s, request(http::verb::get, "/v1/models")), 200);
    EXPECT_EQ(status_of(s, request(http::verb::get, "/v1/models/nope")), 404);
    EXPECT_EQ(status_of(s, request(http::verb::get, "/")), 200);
    EXPECT_EQ(status_of(s, request(http::verb::get, "/nowhere")), 404);
    EXPECT_EQ(status_of(s, request(http::verb::post, "/v1/audio/transcriptions")), 503) << "loading";
    EXPECT_EQ(status_of(s, request(http::verb::post, "/v1/chat/completions")), 404) << "no chat model";
}

// A method the route does not take is 405, also one Beast does not know (verb::unknown, which the
// table uses for "no second method").
TEST(Router, AMethodTheRouteDoesNotTakeIs405) {
    ServerOptions o;
    ServerState s(o, Logger::null());
    EXPECT_EQ(status_of(s, request(http::verb::post, "/health")), 405);
    EXPECT_EQ(status_of(s, request(http::verb::get, "/v1/chat/completions")), 405);
    HttpRequest odd = request(http::verb::get, "/health");
    odd.method_string("BREW");
    ASSERT_EQ(odd.method(), http::verb::unknown);
    EXPECT_EQ(status_of(s, odd), 405);
    EXPECT_EQ(status_of(s, request(http::verb::put, "/v1/responses/resp_1")), 405);
    EXPECT_EQ(status_of(s, request(http::verb::delete_, "/v1/responses/resp_1")), 404) << "none stored";
}

// With a key, a route that needs it answers 401 before anything else (an unknown /v1/ path too,
// so a client without the key learns nothing about which routes exist); /health stays open.
TEST(Router, TheKeyComesFirst) {
    ServerOptions o;
    o.api_key = "secret";
    ServerState s(o, Logger::null());
    EXPECT_EQ(status_of(s, request(http::verb::post, "/v1/models")), 401) << "before the method's 405";
    EXPECT_EQ(status_of(s, request(http::verb::get, "/v1/nowhere")), 401);
    EXPECT_EQ(status_of(s, request(http::verb::get, "/health")), 503);
    HttpRequest keyed = request(http::verb::get, "/v1/models");
    keyed.set(http::field::authorization, "Bearer secret");
    EXPECT_EQ(status_of(s, keyed), 200);
    HttpRequest anthropic = request(http::verb::get, "/v1/models");
    anthropic.set("x-api-key", "secret");
    EXPECT_EQ(status_of(s, anthropic), 401) << "x-api-key is Anthropic's routes' header only";
}

}  // namespace
}  // namespace parlance::server
