// The chat template families, each following its reference Jinja template line by line.
#include "tokenizer/chat_template.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kestrel {
namespace {

constexpr char kQwen25DefaultSystem[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// Debian's Abseil has its own string_view; StrCat needs that one.
absl::string_view Abs(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool Contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Python's str.isspace() for the characters Jinja's trim and str.strip() remove.
size_t WhitespaceAt(std::string_view s, size_t pos) {
  const auto c = static_cast<unsigned char>(s[pos]);
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
  if (c < 0x80) return 0;
  static constexpr const char* kWide[] = {"\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
                                          "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85",
                                          "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89",
                                          "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF",
                                          "\xE2\x81\x9F", "\xE3\x80\x80"};
  for (const char* w : kWide) {
    const std::string_view ws(w);
    if (s.substr(pos, ws.size()) == ws) return ws.size();
  }
  return 0;
}

std::string_view Trim(std::string_view s) {
  size_t n = 0;
  while (!s.empty() && (n = WhitespaceAt(s, 0)) != 0) s.remove_prefix(n);
  for (bool again = true; again && !s.empty();) {
    again = false;
    for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
      if (WhitespaceAt(s, s.size() - back) == back) {
        s.remove_suffix(back);
        again = true;
        break;
      }
    }
  }
  return s;
}

std::string_view StripLeft(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}
std::string_view StripRight(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

std::string RenderChatml(const std::vector<ChatMessage>& messages, const ChatOptions& options, bool qwen25) {
  std::string out;
  if (qwen25 && (messages.empty() || messages[0].role != "system")) {
    absl::StrAppend(&out, "<|im_start|>system\n", kQwen25DefaultSystem, "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string RenderQwen3(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  std::string out;
  const size_t n = messages.size();
  if (n > 0 && messages[0].role == "system") absl::StrAppend(&out, "<|im_start|>system\n", messages[0].content, "<|im_end|>\n");
  // The last user turn that is not a wrapped tool response; thinking is kept only after it.
  size_t last_query = n == 0 ? 0 : n - 1;
  for (size_t k = n; k-- > 0;) {
    const std::string& c = messages[k].content;
    if (messages[k].role == "user" &&
        !(absl::StartsWith(c, "<tool_response>") && absl::EndsWith(c, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
    } else if (m.role == "assistant") {
      std::string_view content = m.content, reasoning;
      const size_t close = content.find("</think>");
      if (close != std::string_view::npos) {
        const std::string_view before = content.substr(0, close);
        const size_t last_close = content.rfind("</think>");
        content = StripLeft(content.substr(last_close + 8), '\n');
        reasoning = StripRight(before, '\n');
        const size_t open = reasoning.rfind("<think>");
        if (open != std::string_view::npos) reasoning = reasoning.substr(open + 7);
        reasoning = StripLeft(reasoning, '\n');
      }
      if (i > last_query && (i + 1 == n || !reasoning.empty())) {
        absl::StrAppend(&out, "<|im_start|>assistant\n<think>\n", Abs(StripRight(StripLeft(reasoning, '\n'), '\n')),
                        "\n</think>\n\n", Abs(StripLeft(content, '\n')));
      } else {
        absl::StrAppend(&out, "<|im_start|>assistant\n", Abs(content));
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      absl::StrAppend(&out, "\n<tool_response>\n", m.content, "\n</tool_response>");
      if (i + 1 == n || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // Other roles are not rendered, as in the reference template.
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string RenderLlama3(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  std::string out = options.bos_token;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n", Abs(Trim(m.content)), "<|eot_id|>");
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

absl::StatusOr<ChatFamily> ChatFamilyFromName(std::string_view name) {
  if (name == "chatml") return ChatFamily::kChatml;
  if (name == "qwen2.5" || name == "qwen2") return ChatFamily::kQwen25;
  if (name == "qwen3") return ChatFamily::kQwen3;
  if (name == "llama3") return ChatFamily::kLlama3;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown chat template family '", std::string(name), "' (known: chatml, qwen2.5, qwen3, llama3)"));
}

const char* ChatFamilyName(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatml: return "chatml";
    case ChatFamily::kQwen25: return "qwen2.5";
    case ChatFamily::kQwen3: return "qwen3";
    case ChatFamily::kLlama3: return "llama3";
  }
  return "unknown";
}

absl::StatusOr<ChatFamily> DetectChatFamily(std::string_view t) {
  if (Contains(t, "<|im_start|>")) {
    if (Contains(t, "enable_thinking") || Contains(t, "</think>")) return ChatFamily::kQwen3;
    if (Contains(t, kQwen25DefaultSystem)) return ChatFamily::kQwen25;
    return ChatFamily::kChatml;
  }
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|end_header_id|>") && Contains(t, "<|eot_id|>")) {
    return ChatFamily::kLlama3;
  }
  if (t.empty()) {
    return absl::InvalidArgumentError("the model has no chat template: name a family (chatml, qwen2.5, qwen3, llama3)");
  }
  return absl::UnimplementedError(
      "the model's chat template is not one Kestrel knows (ChatML, Qwen2.5, Qwen3, Llama 3): name a family "
      "(chatml, qwen2.5, qwen3, llama3) to use one of those formats");
}

std::string RenderChat(ChatFamily family, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  switch (family) {
    case ChatFamily::kChatml: return RenderChatml(messages, options, false);
    case ChatFamily::kQwen25: return RenderChatml(messages, options, true);
    case ChatFamily::kQwen3: return RenderQwen3(messages, options);
    case ChatFamily::kLlama3: return RenderLlama3(messages, options);
  }
  return "";
}

absl::StatusOr<std::string> ApplyChatTemplate(std::string_view family_name, std::string_view chat_template,
                                              const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  if (!family_name.empty()) {
    auto family = ChatFamilyFromName(family_name);
    if (!family.ok()) return family.status();
    return RenderChat(*family, messages, options);
  }
  auto family = DetectChatFamily(chat_template);
  if (!family.ok()) return family.status();
  ChatOptions effective = options;
  if (*family == ChatFamily::kLlama3 && !Contains(chat_template, "add_generation_prompt")) {
    effective.add_generation_prompt = true;  // Llama 3.0's template always ends with the header
  }
  return RenderChat(*family, messages, effective);
}

}  // namespace kestrel
