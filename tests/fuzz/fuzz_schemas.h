// What the request fuzz targets do with a parsed request's schemas: the structured-output check
// the server runs before any grammar work (text/schema_check.h), over the response format and the
// tools' parameters with one budget, as server/chat_completion.cpp does.
#pragma once

#include "server/chat_request.h"
#include "text/schema_check.h"

namespace parlance::fuzz {

inline void check_request_schemas(const server::ChatRequest& r) {
    SchemaBudget budget;
    try {
        if (r.tools.is_array())
            for (const auto& t : r.tools)
                if (t.is_object() && t.contains("function") && t["function"].is_object())
                    check_schema(t["function"].value("parameters", nlohmann::ordered_json::object()), {}, budget);
        if (!r.response_schema.is_null()) check_schema(r.response_schema, {}, budget);
    } catch (const SchemaError&) {
    }
}

}  // namespace parlance::fuzz
