// Chat templates: the families are recognised from the shared Qwen3 and Llama 3 tokenizer_config.json
// templates and render exactly what those Jinja templates render (expected strings written out by
// hand, checked against Jinja2), plus the C API entry point.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kestrel/kestrel.h"
#include "shared_guard.h"
#include "test_support.h"
#include "tokenizer/chat_template.h"

namespace kestrel {
namespace {

using testing::HaveShared;

std::string TemplateOf(const std::string& name) {
  std::ifstream in(testing::SharedPath("tokenizers/" + name + "/tokenizer_config.json"));
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str())["chat_template"].get<std::string>();
}

const std::vector<ChatMessage> kSystemUser = {{"system", "You are helpful."}, {"user", "Hi!"}};
const std::vector<ChatMessage> kSystemUserAssistant = {{"system", "You are helpful."}, {"user", "Hi!"}, {"assistant", "Hello."}};
const std::vector<ChatMessage> kMultiTurn = {{"user", "Q1"}, {"assistant", "<think>\nr1\n</think>\n\nA1"}, {"user", "  Q2\n"}};

std::string Apply(std::string_view family, const std::string& tmpl, const std::vector<ChatMessage>& messages,
                  bool generation_prompt, bool thinking = true) {
  ChatOptions options;
  options.add_generation_prompt = generation_prompt;
  options.enable_thinking = thinking;
  options.bos_token = "<|begin_of_text|>";
  auto text = ApplyChatTemplate(family, tmpl, messages, options);
  REQUIRE(text.ok());
  return *text;
}

TEST_CASE("chat template: Qwen3 template recognised and rendered", "[chat]") {
  if (!HaveShared("tokenizers/qwen3/tokenizer_config.json")) return;
  const std::string tmpl = TemplateOf("qwen3");
  auto family = DetectChatFamily(tmpl);
  REQUIRE(family.ok());
  CHECK(*family == ChatFamily::kQwen3);

  const std::string head = "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n";
  CHECK(Apply("", tmpl, kSystemUser, true) == head + "<|im_start|>assistant\n");
  CHECK(Apply("", tmpl, kSystemUser, false) == head);
  // Thinking off: the empty think block follows the assistant header.
  CHECK(Apply("", tmpl, kSystemUser, true, false) == head + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // The last assistant turn after the last question carries a (here empty) think block.
  const std::string with_reply = head + "<|im_start|>assistant\n<think>\n\n</think>\n\nHello.<|im_end|>\n";
  CHECK(Apply("", tmpl, kSystemUserAssistant, false) == with_reply);
  CHECK(Apply("", tmpl, kSystemUserAssistant, true) == with_reply + "<|im_start|>assistant\n");
  // Earlier turns lose their reasoning.
  CHECK(Apply("", tmpl, kMultiTurn, true) ==
        "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\n  Q2\n<|im_end|>\n"
        "<|im_start|>assistant\n");
  // Named explicitly, the same.
  CHECK(Apply("qwen3", "", kSystemUser, true) == head + "<|im_start|>assistant\n");
}

TEST_CASE("chat template: Llama 3 template recognised and rendered", "[chat]") {
  if (!HaveShared("tokenizers/llama3/tokenizer_config.json")) return;
  const std::string tmpl = TemplateOf("llama3");
  auto family = DetectChatFamily(tmpl);
  REQUIRE(family.ok());
  CHECK(*family == ChatFamily::kLlama3);
  const std::string head =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>";
  const std::string prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  CHECK(Apply("", tmpl, kSystemUser, true) == head + prompt);
  // Llama 3.0's template has no add_generation_prompt switch: it always ends with the header.
  CHECK(Apply("", tmpl, kSystemUser, false) == head + prompt);
  CHECK(Apply("llama3", "", kSystemUser, false) == head);
  CHECK(Apply("", tmpl, kSystemUserAssistant, true) ==
        head + "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>" + prompt);
  // Content is trimmed; thinking does not apply.
  CHECK(Apply("", tmpl, kMultiTurn, true, false) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n<think>\nr1\n</think>\n\nA1<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>" + prompt);
}

TEST_CASE("chat template: plain ChatML and Qwen2.5", "[chat]") {
  CHECK(Apply("chatml", "", kSystemUser, true) ==
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  CHECK(Apply("qwen2.5", "", {{"user", "Hi!"}}, true) ==
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  auto chatml = DetectChatFamily(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
      "'\\n'}}{% endfor %}");
  REQUIRE(chatml.ok());
  CHECK(*chatml == ChatFamily::kChatml);
}

TEST_CASE("chat template: unknown templates and names are errors unless a family is named", "[chat]") {
  const std::string unknown = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
  auto detected = DetectChatFamily(unknown);
  REQUIRE_FALSE(detected.ok());
  CHECK(detected.status().code() == absl::StatusCode::kUnimplemented);
  CHECK_THAT(std::string(detected.status().message()), Catch::Contains("name a family"));
  auto failed = ApplyChatTemplate("", unknown, kSystemUser, ChatOptions());
  CHECK_FALSE(failed.ok());
  CHECK_FALSE(ApplyChatTemplate("", "", kSystemUser, ChatOptions()).ok());
  CHECK(ApplyChatTemplate("chatml", unknown, kSystemUser, ChatOptions()).ok());
  auto bad_name = ApplyChatTemplate("vicuna", "", kSystemUser, ChatOptions());
  REQUIRE_FALSE(bad_name.ok());
  CHECK(bad_name.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("chat template: C API kestrel_chat_apply", "[chat][capi]") {
  const kestrel_chat_message msgs[] = {{"system", "You are helpful."}, {"user", "Hi!"}};
  size_t needed = 0;
  REQUIRE(kestrel_chat_apply(nullptr, "qwen3", msgs, 2, 1, 0, nullptr, 0, &needed) == KESTREL_ERROR_BUFFER_TOO_SMALL);
  const std::string want =
      "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
      "<think>\n\n</think>\n\n";
  CHECK(needed == want.size());
  std::string out(needed, '\0');
  size_t len = 0;
  REQUIRE(kestrel_chat_apply(nullptr, "qwen3", msgs, 2, 1, 0, out.data(), out.size(), &len) == KESTREL_OK);
  CHECK(len == want.size());
  CHECK(out == want);
  out.assign(1024, '\0');
  REQUIRE(kestrel_chat_apply(nullptr, "llama3", msgs, 2, 0, 1, out.data(), out.size(), &len) == KESTREL_OK);
  CHECK(out.substr(0, len) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
  CHECK(kestrel_chat_apply(nullptr, "nope", msgs, 2, 1, 1, out.data(), out.size(), &len) == KESTREL_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kestrel_last_error()).find("nope") != std::string::npos);
  CHECK(kestrel_chat_apply(nullptr, nullptr, msgs, 2, 1, 1, out.data(), out.size(), &len) == KESTREL_ERROR_INVALID_ARGUMENT);
  const kestrel_chat_message null_content[] = {{"user", nullptr}};
  CHECK(kestrel_chat_apply(nullptr, "chatml", null_content, 1, 1, 1, out.data(), out.size(), &len) ==
        KESTREL_ERROR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace kestrel
