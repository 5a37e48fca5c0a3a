// A message in protobuf text format with every field written out, zero
// values included. TextFormat leaves out a proto3 field at its zero value
// (an enum's first value, 0, "", false), so a description "with every
// default written out" would hide exactly the defaults that are zero:
// bias_initializer { kind: ZEROS } printed as bias_initializer { }.

#ifndef TESSERA_COMMON_MODEL_EVERY_FIELD_TEXT_H_
#define TESSERA_COMMON_MODEL_EVERY_FIELD_TEXT_H_

#include <string>

#include "google/protobuf/message.h"

namespace tessera {

// Text format TextFormat::Parser reads back to the same message. Fields
// with presence (messages, oneof members, proto3 optional) are written
// when set, as TextFormat does; every other singular field always.
std::string EveryFieldText(const google::protobuf::Message& message);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_EVERY_FIELD_TEXT_H_
