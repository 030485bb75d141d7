// Chat templates: turns a conversation into the prompt text a model was trained on. Instead of a
// Jinja interpreter, the known template families are written out in C++ and recognised from the
// model's chat_template text (or named by the caller):
//   chatml   <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
//   qwen2.5  chatml with Qwen2.5's default system message when the conversation has none
//   qwen3    chatml with Qwen3's thinking blocks and its enable_thinking switch
//   llama3   <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kestrel {

enum class ChatFamily { kChatml, kQwen25, kQwen3, kLlama3 };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (qwen3 also renders "tool")
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with the assistant header, ready for generation
  bool enable_thinking = true;        // qwen3: false adds an empty think block after the header
  std::string bos_token;              // llama3: the text the conversation starts with
};

// "chatml", "qwen2.5" (or "qwen2"), "qwen3", "llama3"; InvalidArgument for anything else.
absl::StatusOr<ChatFamily> ChatFamilyFromName(std::string_view name);
const char* ChatFamilyName(ChatFamily family);
// Recognises the family of a Hugging Face chat_template: Unimplemented when it is none of them,
// InvalidArgument when the template is empty.
absl::StatusOr<ChatFamily> DetectChatFamily(std::string_view chat_template);

// Renders `messages` in `family`'s format.
std::string RenderChat(ChatFamily family, const std::vector<ChatMessage>& messages, const ChatOptions& options);

// The family named by `family_name` when not empty, else the one recognised in `chat_template`, then
// renders. With a recognised template, quirks of that template are kept (Llama 3.0's template adds
// the assistant header even without add_generation_prompt). Errors: InvalidArgument for an unknown
// family name or for no template and no name, Unimplemented for an unknown template.
absl::StatusOr<std::string> ApplyChatTemplate(std::string_view family_name, std::string_view chat_template,
                                              const std::vector<ChatMessage>& messages, const ChatOptions& options);

}  // namespace kestrel
