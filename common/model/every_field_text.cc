#include "common/model/every_field_text.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace tessera {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void Append(const Message& message, int depth, std::string* out) {
  const Descriptor* type = message.GetDescriptor();
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  for (int i = 0; i < type->field_count(); ++i)
    fields.push_back(type->field(i));
  // Field-number order, as TextFormat prints.
  std::sort(fields.begin(), fields.end(),
            [](const FieldDescriptor* a, const FieldDescriptor* b) {
              return a->number() < b->number();
            });
  const std::string indent(2 * depth, ' ');
  google::protobuf::TextFormat::Printer printer;
  for (const FieldDescriptor* field : fields) {
    int count = 1;
    if (field->is_repeated()) {
      count = reflection->FieldSize(message, field);
    } else if (field->has_presence() && !reflection->HasField(message, field)) {
      continue;
    }
    for (int i = 0; i < count; ++i) {
      const int index = field->is_repeated() ? i : -1;
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& inner =
            field->is_repeated()
                ? reflection->GetRepeatedMessage(message, field, i)
                : reflection->GetMessage(message, field);
        absl::StrAppend(out, indent, field->name(), " {\n");
        Append(inner, depth + 1, out);
        absl::StrAppend(out, indent, "}\n");
        continue;
      }
      std::string value;
      printer.PrintFieldValueToString(message, field, index, &value);
      absl::StrAppend(out, indent, field->name(), ": ", value, "\n");
    }
  }
}

}  // namespace

std::string EveryFieldText(const Message& message) {
  std::string out;
  Append(message, 0, &out);
  return out;
}

}  // namespace tessera
