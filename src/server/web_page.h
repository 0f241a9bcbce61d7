// The web page served at "/": upload a file and see the transcript and its segments.
#pragma once

#include <string>

namespace parlance::server {
const std::string& web_page_html();
}
