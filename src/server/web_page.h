// The web page served at "/": upload a file and see the transcript and its segments, or speak into
// the microphone and watch the live transcript (/v1/realtime).
#pragma once

#include <string>

namespace parlance::server {
const std::string& web_page_html();
}
