// The real Qwen3 chat template (tokenizer_config.json from the registry's Qwen3 tokenizer package)
// rendered by ChatTemplate must equal transformers' apply_chat_template, text and token ids, on
// every conversation tools/reference/chat_reference.py recorded (tests/fixtures/chat).
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "core/model_files.h"
#include "test_support.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace parlance {
namespace {

using nlohmann::ordered_json;

ordered_json read_reference() {
    std::ifstream in(testing::fixtures_dir() / "chat" / "qwen3_chat.json");
    return ordered_json::parse(in);
}

// A directory holding only the tokenizer files of the real Qwen3 package.
ModelFiles qwen3_tokenizer_files() {
    ModelFiles m;
    m.root = testing::assets_dir() / "qwen3";
    m.is_directory = true;
    std::ifstream in(m.root / "tokenizer_config.json");
    m.tokenizer_config = nlohmann::json::parse(in);
    return m;
}

TEST(ChatTemplate, Qwen3MatchesTransformers) {
    const ordered_json ref = read_reference();
    std::unique_ptr<ChatTemplate> tmpl = load_chat_template(qwen3_tokenizer_files());
    ASSERT_TRUE(tmpl);
    const Tokenizer tok = Tokenizer::from_json_file(testing::assets_dir() / "qwen3" / "tokenizer.json");
    ASSERT_GE(ref["templates"].size(), 7u);
    for (const auto& c : ref["templates"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        ChatTemplateInputs in;
        in.messages = c["messages"];
        in.tools = c["tools"];
        in.add_generation_prompt = c["add_generation_prompt"].get<bool>();
        in.kwargs = c["kwargs"];
        const std::string text = tmpl->render(in);
        EXPECT_EQ(text, c["text"].get<std::string>());
        EXPECT_EQ(tok.encode(text, /*parse_special=*/true), c["ids"].get<std::vector<int32_t>>());
    }
}

TEST(ChatTemplate, RefusalsAreErrors) {
    // A template that does not parse is a bad model; one that raises is a bad request.
    EXPECT_THROW(ChatTemplate("{% for m in messages %}{{ m.content }}", {}), Error);
    ChatTemplate strict("{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}ok",
                        {});
    ChatTemplateInputs in;
    in.messages = ordered_json::array({{{"role", "assistant"}, {"content", "x"}}});
    try {
        strict.render(in);
        FAIL() << "no refusal";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("first must be user"), std::string::npos) << e.what();
    }
    in.messages[0]["role"] = "user";
    EXPECT_EQ(strict.render(in), "ok");
}

TEST(ChatTemplate, SpecialTokensAndListTemplates) {
    ModelFiles m;
    m.root = "/nonexistent";
    m.tokenizer_config = {
        {"bos_token", {{"content", "<s>"}}},
        {"chat_template", nlohmann::json::array({{{"name", "tool_use"}, {"template", "T"}},
                                                 {{"name", "default"}, {"template", "{{ bos_token }}D"}}})}};
    auto t = load_chat_template(m);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->render({}), "<s>D");
    m.tokenizer_config = {{"chat_template", 3}};
    EXPECT_THROW(load_chat_template(m), Error);
    m.tokenizer_config = nullptr;
    EXPECT_EQ(load_chat_template(m), nullptr);
}

}  // namespace
}  // namespace parlance
