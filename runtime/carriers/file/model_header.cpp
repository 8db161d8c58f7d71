#include "carriers/file/model_header.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>

#include "base/error.hpp"
#include "base/text.hpp"
#include "core/dtype.hpp"

namespace sw {

namespace {

[[noreturn]] void corrupt(const std::string& source, const std::string& field, const std::string& what) {
  throw_error(SW_ERROR_DATA_CORRUPT, source + ": " + field + ": " + what);
}

[[noreturn]] void unsupported(const std::string& source, const std::string& field, const std::string& what) {
  throw_error(SW_ERROR_UNSUPPORTED, source + ": " + field + ": " + what);
}

// Printable text of an untrusted string for a message: at most 64 bytes,
// bytes outside printable ASCII as \xNN.
std::string printable(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 64) out += "...";
  return out;
}

// The element count and byte size of `shape`, DATA_CORRUPT naming `field`
// when either overflows int64.
uint64_t shape_bytes(const std::vector<int64_t>& shape, sw_dtype_t dtype, const std::string& source,
                     const std::string& field) {
  int64_t n = 1;
  for (int64_t e : shape)
    if (__builtin_mul_overflow(n, e, &n)) corrupt(source, field, "the element count of shape " + shape_text(shape) + " overflows");
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes))
    corrupt(source, field, "the byte size of shape " + shape_text(shape) + " overflows");
  return static_cast<uint64_t>(bytes);
}

uint64_t load_le(const std::byte* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(std::to_integer<uint8_t>(p[i])) << (8 * i);
  return v;
}

// ---- the npy dictionary: a Python literal --------------------------------

class PyDict {
 public:
  PyDict(const char* begin, const char* end, const std::string& source) : p_(begin), begin_(begin), end_(end), source_(source) {}

  // The dictionary's three fields.
  void parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{', "a dictionary");
    skip_ws();
    while (peek() != '}') {
      const size_t at = position();
      const std::string key = string("a key");
      skip_ws();
      expect(':', "':'");
      skip_ws();
      if (key == "descr") {
        if (have_descr) fail("header", "duplicate key 'descr'");
        have_descr = true;
        if (peek() == '[') unsupported(source_, "descr", "structured dtypes (a list of fields) are not supported");
        if (peek() != '\'' && peek() != '"') fail("descr", "not a string");
        *descr = string("the descr string");
      } else if (key == "fortran_order") {
        if (have_order) fail("header", "duplicate key 'fortran_order'");
        have_order = true;
        *fortran_order = boolean();
      } else if (key == "shape") {
        if (have_shape) fail("header", "duplicate key 'shape'");
        have_shape = true;
        *shape = tuple();
      } else {
        (void)at;
        fail("header", "unexpected key '" + printable(key) + "' (an npy header holds descr, fortran_order and shape)");
      }
      skip_ws();
      if (peek() == ',') {
        ++p_;
        skip_ws();
      } else if (peek() != '}') {
        fail("header", "expected ',' or '}' at header byte " + std::to_string(position()));
      }
    }
    ++p_;
    skip_ws();
    if (p_ != end_) fail("header", "unexpected text after the dictionary at header byte " + std::to_string(position()));
    if (!have_descr) fail("descr", "missing");
    if (!have_order) fail("fortran_order", "missing");
    if (!have_shape) fail("shape", "missing");
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& what) const { corrupt(source_, field, what); }
  size_t position() const { return static_cast<size_t>(p_ - begin_); }
  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  void expect(char c, const char* what) {
    if (peek() != c || p_ == end_)
      fail("header", std::string("expected ") + what + " at header byte " + std::to_string(position()));
    ++p_;
  }
  std::string string(const char* what) {
    const char quote = peek();
    if (p_ == end_ || (quote != '\'' && quote != '"'))
      fail("header", std::string("expected ") + what + " at header byte " + std::to_string(position()));
    const char* start = ++p_;
    while (p_ < end_ && *p_ != quote) {
      if (*p_ == '\\') fail("header", "escape sequences are not supported (header byte " + std::to_string(position()) + ")");
      ++p_;
    }
    if (p_ == end_) fail("header", "unterminated string");
    std::string s(start, p_);
    ++p_;
    return s;
  }
  bool word(const char* w) {
    const size_t n = std::strlen(w);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, w, n) != 0) return false;
    const char after = static_cast<size_t>(end_ - p_) > n ? p_[n] : '\0';
    if ((after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') || (after >= '0' && after <= '9') || after == '_')
      return false;
    p_ += n;
    return true;
  }
  bool boolean() {
    if (word("True")) return true;
    if (word("False")) return false;
    fail("fortran_order", "not True or False");
  }
  // A tuple of non-negative integers; `(3)` is an integer in Python, not a tuple.
  std::vector<int64_t> tuple() {
    if (peek() != '(') fail("shape", "not a tuple");
    ++p_;
    std::vector<int64_t> values;
    bool comma = false;
    skip_ws();
    while (peek() != ')') {
      if (p_ == end_) fail("shape", "unterminated tuple");
      if (values.size() >= 64) fail("shape", "more than 64 dimensions");
      values.push_back(integer());
      skip_ws();
      comma = false;
      if (peek() == ',') {
        comma = true;
        ++p_;
        skip_ws();
      } else if (peek() != ')') {
        fail("shape", "expected ',' or ')' at header byte " + std::to_string(position()));
      }
    }
    ++p_;
    if (values.size() == 1 && !comma) fail("shape", "(n) is an integer, not a tuple; a one-dimensional shape is (n,)");
    return values;
  }
  int64_t integer() {
    bool negative = false;
    if (peek() == '-' || peek() == '+') {
      negative = peek() == '-';
      ++p_;
    }
    if (!(peek() >= '0' && peek() <= '9')) fail("shape", "not an integer at header byte " + std::to_string(position()));
    uint64_t v = 0;
    bool overflow = false;
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t d = static_cast<uint64_t>(*p_ - '0');
      if (v > (static_cast<uint64_t>(INT64_MAX) - d) / 10) overflow = true;
      else v = v * 10 + d;
      ++p_;
    }
    if (peek() == 'L' || peek() == 'l') ++p_;  // Python 2's long literals, as NumPy accepts
    if (negative && v != 0) fail("shape", "negative dimension -" + std::to_string(v));
    if (overflow) fail("shape", "a dimension exceeds 2^63 - 1");
    return static_cast<int64_t>(v);
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  const std::string& source_;
};

// The dtype of an npy descr such as '<f4'.
sw_dtype_t npy_dtype(const std::string& descr, const std::string& source) {
  std::string s = descr;
  char order = '\0';
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
    order = s[0];
    s.erase(0, 1);
  }
  static const std::string kinds = "biufcmMOSUVa";
  if (s.empty() || kinds.find(s[0]) == std::string::npos)
    corrupt(source, "descr", "'" + printable(descr) + "' is not a NumPy dtype");
  const char kind = s[0];
  const std::string size = s.substr(1);
  const bool digits = !size.empty() && size.size() <= 4 && std::all_of(size.begin(), size.end(), [](char c) { return c >= '0' && c <= '9'; });
  static const struct {
    char kind;
    const char* size;
    sw_dtype_t dtype;
  } table[] = {{'b', "1", SW_DTYPE_BOOL}, {'u', "1", SW_DTYPE_U8},  {'i', "4", SW_DTYPE_I32}, {'i', "8", SW_DTYPE_I64},
               {'f', "2", SW_DTYPE_F16},  {'f', "4", SW_DTYPE_F32}, {'f', "8", SW_DTYPE_F64}};
  for (const auto& row : table) {
    if (row.kind != kind || size != row.size) continue;
    if (order == '>' && dtype_size(row.dtype) > 1)
      unsupported(source, "descr", "'" + printable(descr) + "' is big-endian; StrideWeave reads little-endian data only");
    if (order == '=' && std::endian::native != std::endian::little)
      unsupported(source, "descr", "'" + printable(descr) + "' is native-endian on a big-endian host");
    return row.dtype;
  }
  if (!digits && kind != 'O' && kind != 'm' && kind != 'M' && kind != 'U' && kind != 'S' && kind != 'V' && kind != 'a')
    corrupt(source, "descr", "'" + printable(descr) + "' is not a NumPy dtype");
  unsupported(source, "descr", "dtype '" + printable(descr) +
                                   "' is not supported (float16/32/64, int32/64, uint8 and bool are)");
}

// ---- JSON -------------------------------------------------------------

struct JsonMember;

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = kNull;
  bool boolean = false;
  std::string text;         // a string's value
  bool integer = false;     // a number without fraction or exponent
  bool negative = false;
  bool overflow = false;    // its magnitude exceeds 2^64 - 1
  uint64_t magnitude = 0;
  std::vector<Json> items;  // array
  std::vector<JsonMember> members;  // object, in order
  size_t position = 0;      // header byte where the value starts
};

// An object's member. Not a std::pair: a pair of an incomplete Json inside
// Json's own definition is rejected by some standard libraries.
struct JsonMember {
  std::string first;
  Json second;
};

constexpr int kMaxJsonDepth = 64;

class JsonParser {
 public:
  JsonParser(const char* begin, const char* end, const std::string& source) : p_(begin), begin_(begin), end_(end), source_(source) {}

  Json document() {
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (p_ != end_) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    corrupt(source_, "header", "not valid JSON at header byte " + std::to_string(p_ - begin_) + ": " + what);
  }
  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  bool at_end() const { return p_ >= end_; }
  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  void literal(const char* w) {
    const size_t n = std::strlen(w);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, w, n) != 0) fail("unexpected character");
    p_ += n;
  }

  Json value(int depth) {
    if (depth > kMaxJsonDepth) fail("nesting deeper than " + std::to_string(kMaxJsonDepth));
    if (at_end()) fail("unexpected end");
    Json v;
    v.position = static_cast<size_t>(p_ - begin_);
    switch (*p_) {
      case '{': {
        v.kind = Json::kObject;
        ++p_;
        skip_ws();
        if (peek() == '}' && !at_end()) {
          ++p_;
          return v;
        }
        for (;;) {
          skip_ws();
          if (peek() != '"' || at_end()) fail("expected a string key");
          std::string key = string();
          skip_ws();
          if (peek() != ':' || at_end()) fail("expected ':'");
          ++p_;
          skip_ws();
          v.members.push_back(JsonMember{std::move(key), value(depth + 1)});
          skip_ws();
          if (at_end()) fail("unterminated object");
          if (*p_ == ',') {
            ++p_;
            continue;
          }
          if (*p_ == '}') {
            ++p_;
            return v;
          }
          fail("expected ',' or '}'");
        }
      }
      case '[': {
        v.kind = Json::kArray;
        ++p_;
        skip_ws();
        if (peek() == ']' && !at_end()) {
          ++p_;
          return v;
        }
        for (;;) {
          skip_ws();
          v.items.push_back(value(depth + 1));
          skip_ws();
          if (at_end()) fail("unterminated array");
          if (*p_ == ',') {
            ++p_;
            continue;
          }
          if (*p_ == ']') {
            ++p_;
            return v;
          }
          fail("expected ',' or ']'");
        }
      }
      case '"':
        v.kind = Json::kString;
        v.text = string();
        return v;
      case 't':
        literal("true");
        v.kind = Json::kBool;
        v.boolean = true;
        return v;
      case 'f':
        literal("false");
        v.kind = Json::kBool;
        return v;
      case 'n':
        literal("null");
        return v;
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) {
          number(&v);
          return v;
        }
        fail("unexpected character");
    }
  }

  void number(Json* v) {
    v->kind = Json::kNumber;
    v->integer = true;
    if (peek() == '-') {
      v->negative = true;
      ++p_;
    }
    if (!(peek() >= '0' && peek() <= '9') || at_end()) fail("expected a digit");
    if (*p_ == '0' && p_ + 1 < end_ && p_[1] >= '0' && p_[1] <= '9') fail("a number with a leading zero");
    while (!at_end() && *p_ >= '0' && *p_ <= '9') {
      const uint64_t d = static_cast<uint64_t>(*p_ - '0');
      if (v->magnitude > (UINT64_MAX - d) / 10) v->overflow = true;
      else v->magnitude = v->magnitude * 10 + d;
      ++p_;
    }
    if (!at_end() && *p_ == '.') {
      v->integer = false;
      ++p_;
      if (!(peek() >= '0' && peek() <= '9') || at_end()) fail("expected a digit after '.'");
      while (!at_end() && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (!at_end() && (*p_ == 'e' || *p_ == 'E')) {
      v->integer = false;
      ++p_;
      if (!at_end() && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!(peek() >= '0' && peek() <= '9') || at_end()) fail("expected a digit in the exponent");
      while (!at_end() && *p_ >= '0' && *p_ <= '9') ++p_;
    }
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  uint32_t hex4() {
    if (end_ - p_ < 4) fail("a truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      const char c = *p_;
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("a bad \\u escape");
    }
    return v;
  }

  // A string starting at its opening quote, UTF-8 checked.
  std::string string() {
    ++p_;
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return out;
      }
      if (c < 0x20) fail("a control character in a string");
      if (c == '\\') {
        ++p_;
        if (at_end()) fail("unterminated string");
        const char e = *p_++;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xdc00 && cp <= 0xdfff) fail("a lone low surrogate");
            if (cp >= 0xd800 && cp <= 0xdbff) {
              if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') fail("a lone high surrogate");
              p_ += 2;
              const uint32_t low = hex4();
              if (low < 0xdc00 || low > 0xdfff) fail("a high surrogate without its low half");
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            }
            append_utf8(out, cp);
            break;
          }
          default:
            fail("a bad escape");
        }
        continue;
      }
      if (c < 0x80) {
        out += static_cast<char>(c);
        ++p_;
        continue;
      }
      // A multi-byte UTF-8 sequence: no overlong forms, no surrogates, at most U+10FFFF.
      int n;
      uint32_t cp, min;
      if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; min = 0x80; }
      else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; min = 0x800; }
      else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; min = 0x10000; }
      else fail("invalid UTF-8");
      if (end_ - p_ <= n) fail("truncated UTF-8");
      for (int i = 1; i <= n; ++i) {
        const unsigned char t = static_cast<unsigned char>(p_[i]);
        if ((t & 0xc0) != 0x80) fail("invalid UTF-8");
        cp = (cp << 6) | (t & 0x3f);
      }
      if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail("invalid UTF-8");
      out.append(p_, static_cast<size_t>(n + 1));
      p_ += n + 1;
    }
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  const std::string& source_;
};

struct SafetensorsDtype {
  const char* name;
  sw_dtype_t dtype;  // SW_DTYPE_INVALID: defined by the format, not supported
};

// Every dtype the safetensors format defines.
constexpr SafetensorsDtype kSafetensorsDtypes[] = {
    {"BOOL", SW_DTYPE_BOOL}, {"U8", SW_DTYPE_U8},   {"F16", SW_DTYPE_F16},  {"BF16", SW_DTYPE_BF16},
    {"I32", SW_DTYPE_I32},   {"I64", SW_DTYPE_I64}, {"F32", SW_DTYPE_F32},  {"F64", SW_DTYPE_F64},
    {"I8", SW_DTYPE_INVALID}, {"I16", SW_DTYPE_INVALID}, {"U16", SW_DTYPE_INVALID}, {"U32", SW_DTYPE_INVALID},
    {"U64", SW_DTYPE_INVALID}, {"F8_E4M3", SW_DTYPE_INVALID}, {"F8_E5M2", SW_DTYPE_INVALID},
    {"F8_E8M0", SW_DTYPE_INVALID}, {"F4", SW_DTYPE_INVALID}, {"F6_E2M3", SW_DTYPE_INVALID},
    {"F6_E3M2", SW_DTYPE_INVALID}, {"C64", SW_DTYPE_INVALID},
};

std::string tensor_field(const std::string& name, const char* field) {
  return "tensor '" + printable(name) + "'" + (*field ? " " : "") + field;
}

// A JSON number as a non-negative integer, DATA_CORRUPT naming `field`.
uint64_t json_count(const Json& v, const std::string& source, const std::string& field, uint64_t max) {
  if (v.kind != Json::kNumber || !v.integer) corrupt(source, field, "not an integer");
  if (v.negative && (v.magnitude != 0 || v.overflow)) corrupt(source, field, "negative value");
  if (v.overflow || v.magnitude > max) corrupt(source, field, "value exceeds " + std::to_string(max));
  return v.magnitude;
}

void json_escape(std::string& out, const std::string& s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

}  // namespace

// ---- npy ----------------------------------------------------------------

uint64_t npy_header_length(const std::byte* data, size_t size, uint64_t file_size, const std::string& source) {
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 8 || file_size < 8) corrupt(source, "header", "truncated: " + std::to_string(std::min<uint64_t>(size, file_size)) + " bytes, not an npy file");
  if (std::memcmp(data, magic, 6) != 0) corrupt(source, "magic", "not an npy file (the first bytes are not \\x93NUMPY)");
  const unsigned major = std::to_integer<unsigned>(data[6]), minor = std::to_integer<unsigned>(data[7]);
  if (major == 3 && minor == 0)
    unsupported(source, "version", "npy format 3.0 (UTF-8 headers) is not supported; only 1.0 and 2.0 are");
  if ((major != 1 && major != 2) || minor != 0)
    unsupported(source, "version", "npy format " + std::to_string(major) + "." + std::to_string(minor) +
                                       " is not supported; only 1.0 and 2.0 are");
  const size_t prefix = major == 1 ? 10 : 12;
  if (size < prefix || file_size < prefix) corrupt(source, "header", "truncated inside the header length");
  const uint64_t length = load_le(data + 8, prefix - 8);
  if (length > kNpyMaxHeaderBytes)
    corrupt(source, "header length", std::to_string(length) + " bytes exceeds the limit of " + std::to_string(kNpyMaxHeaderBytes));
  if (prefix + length > file_size)
    corrupt(source, "header length", std::to_string(length) + " bytes passes the end of the file (" +
                                         std::to_string(file_size) + " bytes)");
  return prefix + length;
}

StoredTensor parse_npy_header(const std::byte* data, size_t size, uint64_t file_size, const std::string& source) {
  if (size > file_size) size = static_cast<size_t>(file_size);
  const uint64_t total = npy_header_length(data, size, file_size, source);
  const size_t prefix = std::to_integer<unsigned>(data[6]) == 1 ? 10 : 12;
  if (total > size) corrupt(source, "header", "truncated: the header needs " + std::to_string(total) + " bytes, " + std::to_string(size) + " given");
  const char* text = reinterpret_cast<const char*>(data + prefix);
  const char* end = reinterpret_cast<const char*>(data + total);
  for (const char* c = text; c < end; ++c)
    if (static_cast<unsigned char>(*c) >= 0x80 || *c == '\0')
      corrupt(source, "header", std::string(*c ? "a non-ASCII" : "a NUL") + " byte at header byte " + std::to_string(c - text));
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  PyDict(text, end, source).parse(&descr, &fortran, &shape);
  StoredTensor t;
  t.dtype = npy_dtype(descr, source);
  if (shape.size() > SW_MAX_RANK)
    unsupported(source, "shape", "rank " + std::to_string(shape.size()) + " exceeds SW_MAX_RANK (" + std::to_string(SW_MAX_RANK) + ")");
  t.shape = shape;
  t.fortran_order = fortran;
  t.offset = total;
  t.bytes = shape_bytes(shape, t.dtype, source, "shape");
  if (t.bytes > file_size - total)
    corrupt(source, "data", "truncated: shape " + shape_text(shape) + " of " + dtype_name(t.dtype) + " needs " +
                                std::to_string(t.bytes) + " bytes, the file holds " + std::to_string(file_size - total) +
                                " after its header");
  return t;
}

std::string npy_header(sw_dtype_t dtype, const std::vector<int64_t>& shape, const std::string& target) {
  const char* descr = nullptr;
  switch (dtype) {
    case SW_DTYPE_F32: descr = "<f4"; break;
    case SW_DTYPE_F64: descr = "<f8"; break;
    case SW_DTYPE_F16: descr = "<f2"; break;
    case SW_DTYPE_I32: descr = "<i4"; break;
    case SW_DTYPE_I64: descr = "<i8"; break;
    case SW_DTYPE_U8: descr = "|u1"; break;
    case SW_DTYPE_BOOL: descr = "|b1"; break;
    default:
      unsupported(target, "dtype", std::string("npy has no ") + dtype_name(dtype) + " dtype; save it as safetensors");
  }
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  size_t prefix = 10;
  size_t length = dict.size() + 1;  // the closing newline
  size_t pad = (64 - (prefix + length) % 64) % 64;
  if (length + pad > 65535) {
    prefix = 12;
    pad = (64 - (prefix + length) % 64) % 64;
  }
  length += pad;
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(prefix == 10 ? 1 : 2);
  out += '\0';
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((length >> (8 * i)) & 0xff);
  out += dict;
  out.append(pad, ' ');
  out += '\n';
  return out;
}

// ---- safetensors --------------------------------------------------------

const StoredTensor* SafetensorsHeader::find(const std::string& name) const {
  for (const StoredTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

// DATA_CORRUPT for input that is no safetensors file at all (an index.json,
// an .npy, a text file): its first bytes read as an implausible header. A
// file's message starts with its quoted path, "'<path>' is not a safetensors
// file: ..."; other sources keep the "<source>: " form of every message.
[[noreturn]] void not_safetensors(const std::string& source, const std::string& what) {
  static const std::string file_prefix = "safetensors file ";
  if (source.compare(0, file_prefix.size(), file_prefix) == 0)
    throw_error(SW_ERROR_DATA_CORRUPT, source.substr(file_prefix.size()) + " is not a safetensors file: " + what);
  throw_error(SW_ERROR_DATA_CORRUPT, source + ": not a safetensors file: " + what);
}

}  // namespace

uint64_t safetensors_header_length(const std::byte* data, size_t size, uint64_t file_size, const std::string& source) {
  if (size < 8 || file_size < 8)
    corrupt(source, "header length", "truncated: " + std::to_string(std::min<uint64_t>(size, file_size)) +
                                         " bytes, not a safetensors file (it starts with an 8-byte length)");
  const uint64_t n = load_le(data, 8);
  // A safetensors file starts with the little-endian length of the JSON
  // header that follows it. Text, an .npy magic or any other format read as
  // that length gives an absurd number (8 ASCII bytes read at least 2^61):
  // say what the file is not rather than report the number alone.
  if (n > kSafetensorsMaxHeaderBytes)
    not_safetensors(source, "header length: " + std::to_string(n) + " bytes exceeds the limit of " +
                                std::to_string(kSafetensorsMaxHeaderBytes) + " (its first 8 bytes are not a header length)");
  if (n > file_size - 8)
    not_safetensors(source, "header length: " + std::to_string(n) + " bytes passes the end of the file (" +
                                std::to_string(file_size) + " bytes)");
  if (n > 0 && size > 8 && std::to_integer<char>(data[8]) != '{')
    not_safetensors(source, "the JSON header after the 8-byte length must start with '{'");
  return n;
}

SafetensorsHeader parse_safetensors_header(const std::byte* data, size_t size, uint64_t file_size,
                                           const std::string& source) {
  if (size > file_size) size = static_cast<size_t>(file_size);
  const uint64_t n = safetensors_header_length(data, size, file_size, source);
  if (8 + n > size) corrupt(source, "header", "truncated: the header needs " + std::to_string(8 + n) + " bytes, " + std::to_string(size) + " given");
  const char* text = reinterpret_cast<const char*>(data + 8);
  if (n == 0 || text[0] != '{') corrupt(source, "header", "not a JSON object (it must start with '{')");
  const Json root = JsonParser(text, text + n, source).document();
  if (root.kind != Json::kObject) corrupt(source, "header", "not a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_bytes = file_size - h.data_start;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) relative, per tensor
  bool have_metadata = false;
  for (const auto& [name, entry] : root.members) {
    if (name == "__metadata__") {
      if (have_metadata) corrupt(source, "__metadata__", "appears twice");
      have_metadata = true;
      if (entry.kind != Json::kObject) corrupt(source, "__metadata__", "not an object");
      for (const auto& [key, value] : entry.members)
        if (value.kind != Json::kString) corrupt(source, "__metadata__", "the value of '" + printable(key) + "' is not a string");
      continue;
    }
    for (const StoredTensor& t : h.tensors)
      if (t.name == name) corrupt(source, tensor_field(name, ""), "duplicate tensor name");
    if (entry.kind != Json::kObject) corrupt(source, tensor_field(name, ""), "not an object");
    const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const auto& [key, value] : entry.members) {
      const Json** slot = key == "dtype" ? &dtype : key == "shape" ? &shape : key == "data_offsets" ? &offsets : nullptr;
      if (!slot) continue;  // fields a later format version may add
      if (*slot) corrupt(source, tensor_field(name, key.c_str()), "appears twice");
      *slot = &value;
    }
    if (!dtype) corrupt(source, tensor_field(name, "dtype"), "missing");
    if (!shape) corrupt(source, tensor_field(name, "shape"), "missing");
    if (!offsets) corrupt(source, tensor_field(name, "data_offsets"), "missing");

    StoredTensor t;
    t.name = name;
    if (dtype->kind != Json::kString) corrupt(source, tensor_field(name, "dtype"), "not a string");
    const SafetensorsDtype* known = nullptr;
    for (const SafetensorsDtype& d : kSafetensorsDtypes)
      if (dtype->text == d.name) known = &d;
    if (!known) corrupt(source, tensor_field(name, "dtype"), "unknown dtype '" + printable(dtype->text) + "'");
    if (known->dtype == SW_DTYPE_INVALID)
      unsupported(source, tensor_field(name, "dtype"), std::string("dtype ") + known->name +
                                                           " is not supported (F32, F64, F16, BF16, I32, I64, U8 and BOOL are)");
    t.dtype = known->dtype;

    if (shape->kind != Json::kArray) corrupt(source, tensor_field(name, "shape"), "not an array");
    if (shape->items.size() > SW_MAX_RANK)
      unsupported(source, tensor_field(name, "shape"), "rank " + std::to_string(shape->items.size()) +
                                                           " exceeds SW_MAX_RANK (" + std::to_string(SW_MAX_RANK) + ")");
    for (const Json& d : shape->items)
      t.shape.push_back(static_cast<int64_t>(json_count(d, source, tensor_field(name, "shape"), INT64_MAX)));
    t.bytes = shape_bytes(t.shape, t.dtype, source, tensor_field(name, "shape"));

    const std::string field = tensor_field(name, "data_offsets");
    if (offsets->kind != Json::kArray || offsets->items.size() != 2) corrupt(source, field, "not an array of two offsets");
    const uint64_t begin = json_count(offsets->items[0], source, field, UINT64_MAX);
    const uint64_t end = json_count(offsets->items[1], source, field, UINT64_MAX);
    if (begin > end) corrupt(source, field, "begin " + std::to_string(begin) + " is past end " + std::to_string(end));
    if (end - begin != t.bytes)
      corrupt(source, field, "[" + std::to_string(begin) + ", " + std::to_string(end) + ") holds " + std::to_string(end - begin) +
                                 " bytes, but shape " + shape_text(t.shape) + " of " + known->name + " needs " + std::to_string(t.bytes));
    if (end > data_bytes)
      corrupt(source, field, "end " + std::to_string(end) + " passes the end of the file's data (" + std::to_string(data_bytes) + " bytes)");
    t.offset = h.data_start + begin;
    ranges.emplace_back(begin, end);
    h.tensors.push_back(std::move(t));
  }
  // No two tensors share a byte.
  std::vector<size_t> order(h.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  size_t last = SIZE_MAX;
  for (size_t i : order) {
    if (ranges[i].first == ranges[i].second) continue;
    if (last != SIZE_MAX && ranges[i].first < ranges[last].second)
      corrupt(source, tensor_field(h.tensors[i].name, "data_offsets"),
              "overlaps tensor '" + printable(h.tensors[last].name) + "'");
    if (last == SIZE_MAX || ranges[i].second > ranges[last].second) last = i;
  }
  return h;
}

const char* safetensors_dtype_name(sw_dtype_t dtype) {
  for (const SafetensorsDtype& d : kSafetensorsDtypes)
    if (d.dtype == dtype && dtype != SW_DTYPE_INVALID) return d.name;
  return nullptr;
}

std::string safetensors_header(std::vector<StoredTensor>& tensors,
                               const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      if (i) json += ',';
      json_escape(json, metadata[i].first);
      json += ':';
      json_escape(json, metadata[i].second);
    }
    json += '}';
  }
  uint64_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    StoredTensor& t = tensors[i];
    if (i || !metadata.empty()) json += ',';
    json_escape(json, t.name);
    json += ":{\"dtype\":\"";
    json += safetensors_dtype_name(t.dtype);
    json += "\",\"shape\":[";
    for (size_t j = 0; j < t.shape.size(); ++j) { if (j) json += ","; json += std::to_string(t.shape[j]); }
    json += "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + t.bytes) + "]}";
    t.offset = at;
    at += t.bytes;
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<uint64_t>(json.size()) >> (8 * i)) & 0xff);
  out += json;
  for (StoredTensor& t : tensors) t.offset += out.size();
  return out;
}

// ---- GGUF -----------------------------------------------------------------

namespace {

struct GgufValueTypeInfo {
  const char* name;
  size_t size;  // 0: variable
};

constexpr GgufValueTypeInfo kGgufValueTypes[] = {
    {"UINT8", 1}, {"INT8", 1},   {"UINT16", 2}, {"INT16", 2},  {"UINT32", 4}, {"INT32", 4},   {"FLOAT32", 4},
    {"BOOL", 1},  {"STRING", 0}, {"ARRAY", 0},  {"UINT64", 8}, {"INT64", 8},  {"FLOAT64", 8},
};

// Every tensor type the format defines (gguf-py's GGML_QUANT_SIZES); the ids
// it skips are types ggml removed; the types with a StrideWeave dtype name it
// (gguf_tensor_dtype refuses the others).
constexpr GgufType kGgufTypes[] = {
    {0, "F32", 1, 4, SW_DTYPE_F32},
    {1, "F16", 1, 2, SW_DTYPE_F16},
    {2, "Q4_0", 32, 18, SW_DTYPE_Q4_0},
    {3, "Q4_1", 32, 20, SW_DTYPE_INVALID},
    {6, "Q5_0", 32, 22, SW_DTYPE_INVALID},
    {7, "Q5_1", 32, 24, SW_DTYPE_INVALID},
    {8, "Q8_0", 32, 34, SW_DTYPE_Q8_0},
    {9, "Q8_1", 32, 40, SW_DTYPE_INVALID},
    {10, "Q2_K", 256, 84, SW_DTYPE_INVALID},
    {11, "Q3_K", 256, 110, SW_DTYPE_INVALID},
    {12, "Q4_K", 256, 144, SW_DTYPE_Q4_K},
    {13, "Q5_K", 256, 176, SW_DTYPE_INVALID},
    {14, "Q6_K", 256, 210, SW_DTYPE_Q6_K},
    {15, "Q8_K", 256, 292, SW_DTYPE_INVALID},
    {16, "IQ2_XXS", 256, 66, SW_DTYPE_INVALID},
    {17, "IQ2_XS", 256, 74, SW_DTYPE_INVALID},
    {18, "IQ3_XXS", 256, 98, SW_DTYPE_INVALID},
    {19, "IQ1_S", 256, 50, SW_DTYPE_INVALID},
    {20, "IQ4_NL", 32, 18, SW_DTYPE_INVALID},
    {21, "IQ3_S", 256, 110, SW_DTYPE_INVALID},
    {22, "IQ2_S", 256, 82, SW_DTYPE_INVALID},
    {23, "IQ4_XS", 256, 136, SW_DTYPE_INVALID},
    {24, "I8", 1, 1, SW_DTYPE_INVALID},
    {25, "I16", 1, 2, SW_DTYPE_INVALID},
    {26, "I32", 1, 4, SW_DTYPE_I32},
    {27, "I64", 1, 8, SW_DTYPE_I64},
    {28, "F64", 1, 8, SW_DTYPE_F64},
    {29, "IQ1_M", 256, 56, SW_DTYPE_INVALID},
    {30, "BF16", 1, 2, SW_DTYPE_BF16},
    {34, "TQ1_0", 256, 54, SW_DTYPE_INVALID},
    {35, "TQ2_0", 256, 66, SW_DTYPE_INVALID},
    {39, "MXFP4", 32, 17, SW_DTYPE_MXFP4},
    {40, "NVFP4", 64, 36, SW_DTYPE_INVALID},
    {41, "Q1_0", 128, 18, SW_DTYPE_INVALID},
};

// Thrown inside the parser when the buffer ends before the header does but
// the file does not; parse_gguf_header turns it into *more.
struct GgufNeedMore {
  uint64_t bytes;
};

// A bounds-checked little-endian reader over the buffer. Every length it is
// given is checked against the file before anything is allocated for it.
class GgufReader {
 public:
  GgufReader(const std::byte* data, size_t size, uint64_t file_size, const std::string& source, bool want_more)
      : data_(data), size_(size), file_size_(file_size), source_(source), want_more_(want_more) {}

  uint64_t position() const { return pos_; }
  // Bytes of the file after the current position.
  uint64_t file_left() const { return file_size_ - pos_; }
  const std::string& source() const { return source_; }

  // Makes sure `n` bytes follow: DATA_CORRUPT naming `field` when they pass
  // the end of the file; the buffer's end asks for more or is "truncated".
  void need(uint64_t n, const std::string& field) {
    if (n > file_size_ - pos_)
      corrupt(source_, field,
              "needs " + std::to_string(n) + " bytes at byte " + std::to_string(pos_) +
                  ", which passes the end of the file (" + std::to_string(file_size_) + " bytes)");
    if (n > size_ - pos_) {
      if (want_more_) throw GgufNeedMore{pos_ + n};
      corrupt(source_, field,
              "truncated: the header needs at least " + std::to_string(pos_ + n) + " bytes, " + std::to_string(size_) +
                  " given");
    }
  }
  uint64_t u(size_t bytes, const std::string& field) {
    need(bytes, field);
    const uint64_t v = load_le(data_ + pos_, bytes);
    pos_ += bytes;
    return v;
  }
  uint32_t u32(const std::string& field) { return static_cast<uint32_t>(u(4, field)); }
  uint64_t u64(const std::string& field) { return u(8, field); }
  std::string bytes(uint64_t n, const std::string& field) {
    need(n, field);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }
  // A GGUF string: a 64-bit length and its bytes.
  std::string string(const std::string& field) {
    const uint64_t n = u64(field);
    if (n > file_left())
      corrupt(source_, field,
              "string length " + std::to_string(n) + " passes the end of the file (" + std::to_string(file_size_) +
                  " bytes)");
    return bytes(n, field);
  }

 private:
  const std::byte* data_;
  size_t size_;
  uint64_t file_size_;
  const std::string& source_;
  bool want_more_;
  uint64_t pos_ = 0;
};

std::string metadata_field(const std::string& key) { return "metadata '" + printable(key) + "'"; }

GgufValue gguf_value(GgufReader& r, uint32_t type, const std::string& field, int depth) {
  GgufValue v;
  v.type = type;
  if (type >= std::size(kGgufValueTypes)) corrupt(r.source(), field, "unknown value type " + std::to_string(type));
  if (type == static_cast<uint32_t>(GgufValueType::kString)) {
    v.text = r.string(field);
    return v;
  }
  if (type != static_cast<uint32_t>(GgufValueType::kArray)) {
    v.bits = r.u(kGgufValueTypes[type].size, field);
    return v;
  }
  if (depth >= kGgufMaxArrayDepth)
    corrupt(r.source(), field, "arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth));
  v.element_type = r.u32(field);
  v.count = r.u64(field);
  if (v.element_type >= std::size(kGgufValueTypes))
    corrupt(r.source(), field, "unknown array element type " + std::to_string(v.element_type));
  // The least each element takes: its size, a string's length, an array's
  // element type and count.
  const size_t fixed = kGgufValueTypes[v.element_type].size;
  const uint64_t least = fixed ? fixed : v.element_type == static_cast<uint32_t>(GgufValueType::kString) ? 8 : 12;
  if (v.count > r.file_left() / least)
    corrupt(r.source(), field,
            "an array of " + std::to_string(v.count) + " " + kGgufValueTypes[v.element_type].name +
                " values cannot fit in the " + std::to_string(r.file_left()) + " bytes left in the file");
  if (fixed) {
    v.raw = r.bytes(v.count * fixed, field);
  } else if (v.element_type == static_cast<uint32_t>(GgufValueType::kString)) {
    for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(r.string(field));
  } else {
    for (uint64_t i = 0; i < v.count; ++i) v.items.push_back(gguf_value(r, v.element_type, field, depth + 1));
  }
  return v;
}

}  // namespace

const char* gguf_value_type_name(uint32_t type) {
  return type < std::size(kGgufValueTypes) ? kGgufValueTypes[type].name : nullptr;
}

size_t gguf_value_size(uint32_t type) { return type < std::size(kGgufValueTypes) ? kGgufValueTypes[type].size : 0; }

const GgufType* gguf_type(uint32_t id) {
  for (const GgufType& t : kGgufTypes)
    if (t.id == id) return &t;
  return nullptr;
}

const GgufType* gguf_type_of(sw_dtype_t dtype) {
  for (const GgufType& t : kGgufTypes)
    if (t.dtype == dtype && dtype != SW_DTYPE_INVALID) return &t;
  return nullptr;
}

const GgufTensor* GgufHeader::find(const std::string& name) const {
  for (const GgufTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

GgufHeader parse_gguf_header(const std::byte* data, size_t size, uint64_t file_size, const std::string& source,
                             uint64_t* more) {
  if (more) *more = 0;
  if (size > file_size) size = static_cast<size_t>(file_size);
  GgufReader r(data, size, file_size, source, more != nullptr);
  GgufHeader h;
  std::vector<uint64_t> relative;  // each tensor's offset in the data section
  try {
    if (file_size < 4 || (size >= 4 && std::memcmp(data, "GGUF", 4) != 0))
      corrupt(source, "magic", "not a GGUF file (it does not start with \"GGUF\")");
    r.u(4, "magic");
    const uint32_t version = r.u32("version");
    // A big-endian file's version reads byte-swapped: 0x03000000.
    if ((version & 0xffff) == 0 && (version >> 24) >= 2 && (version >> 24) <= 3)
      unsupported(source, "version", "a big-endian GGUF file; StrideWeave reads little-endian files only");
    if (version != 2 && version != 3)
      unsupported(source, "version",
                  "GGUF version " + std::to_string(version) + " is not supported; versions 2 and 3 are");
    h.version = version;
    const uint64_t tensor_count = r.u64("tensor count");
    const uint64_t kv_count = r.u64("metadata count");
    // A key value takes at least 13 bytes (a key's length, a type, a byte);
    // a tensor info 24 (a name's length, n_dims, a type, an offset).
    if (kv_count > r.file_left() / 13)
      corrupt(source, "metadata count",
              std::to_string(kv_count) + " key values cannot fit in a file of " + std::to_string(file_size) + " bytes");
    if (tensor_count > r.file_left() / 24)
      corrupt(source, "tensor count",
              std::to_string(tensor_count) + " tensor infos cannot fit in a file of " + std::to_string(file_size) +
                  " bytes");

    std::set<std::string> keys;
    for (uint64_t i = 0; i < kv_count; ++i) {
      std::string key = r.string("metadata key " + std::to_string(i));
      const std::string field = metadata_field(key);
      if (!keys.insert(key).second) corrupt(source, field, "duplicate key");
      const uint32_t type = r.u32(field);
      GgufValue v = gguf_value(r, type, field, 0);
      if (key == "general.alignment") {
        if (type != static_cast<uint32_t>(GgufValueType::kUint32))
          corrupt(source, field,
                  std::string("is ") + (gguf_value_type_name(type) ? gguf_value_type_name(type) : "?") +
                      ", not UINT32");
        if (v.bits == 0 || (v.bits & (v.bits - 1)) != 0)
          corrupt(source, field, std::to_string(v.bits) + " is not a power of two");
        h.alignment = static_cast<uint32_t>(v.bits);
      }
      h.metadata.emplace_back(std::move(key), std::move(v));
    }

    std::set<std::string> names;
    for (uint64_t i = 0; i < tensor_count; ++i) {
      GgufTensor t;
      t.name = r.string("tensor info " + std::to_string(i) + " name");
      if (!names.insert(t.name).second) corrupt(source, tensor_field(t.name, ""), "duplicate tensor name");
      const uint32_t n_dims = r.u32(tensor_field(t.name, "n_dims"));
      if (n_dims > kGgufMaxDims)
        corrupt(source, tensor_field(t.name, "n_dims"),
                std::to_string(n_dims) + " dimensions; GGUF tensors have at most " + std::to_string(kGgufMaxDims));
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t e = r.u64(tensor_field(t.name, "ne"));
        if (e > static_cast<uint64_t>(INT64_MAX))
          corrupt(source, tensor_field(t.name, "ne"),
                  "dimension " + std::to_string(d) + " is " + std::to_string(e) + ", above 2^63 - 1");
        t.ne.push_back(static_cast<int64_t>(e));
      }
      const uint32_t type = r.u32(tensor_field(t.name, "type"));
      t.type = gguf_type(type);
      if (!t.type) corrupt(source, tensor_field(t.name, "type"), "unknown ggml type " + std::to_string(type));
      int64_t n = 1;
      for (int64_t e : t.ne)
        if (__builtin_mul_overflow(n, e, &n))
          corrupt(source, tensor_field(t.name, "ne"), "the element count of ne " + shape_text(t.ne) + " overflows");
      const int64_t first = t.ne.empty() ? 1 : t.ne[0];
      if (first % t.type->block != 0)
        corrupt(source, tensor_field(t.name, "ne"),
                "the first dimension " + std::to_string(first) + " is not a multiple of " + t.type->name +
                    "'s block of " + std::to_string(t.type->block) + " elements");
      int64_t bytes;
      if (__builtin_mul_overflow(n / t.type->block, static_cast<int64_t>(t.type->bytes), &bytes))
        corrupt(source, tensor_field(t.name, "ne"),
                "the byte size of ne " + shape_text(t.ne) + " of " + t.type->name + " overflows");
      t.bytes = static_cast<uint64_t>(bytes);
      const uint64_t offset = r.u64(tensor_field(t.name, "offset"));
      if (offset % h.alignment != 0)
        corrupt(source, tensor_field(t.name, "offset"),
                std::to_string(offset) + " is not a multiple of the alignment " + std::to_string(h.alignment));
      relative.push_back(offset);
      h.tensors.push_back(std::move(t));
    }
    h.data_start = (r.position() + h.alignment - 1) / h.alignment * h.alignment;
  } catch (const GgufNeedMore& need) {
    *more = need.bytes;
    return GgufHeader{};
  }

  if (!h.tensors.empty() && h.data_start > file_size)
    corrupt(source, "data", "the tensor data starts at byte " + std::to_string(h.data_start) +
                                " (the header padded to the alignment), past the end of the file (" +
                                std::to_string(file_size) + " bytes)");
  const uint64_t data_bytes = file_size > h.data_start ? file_size - h.data_start : 0;
  std::vector<size_t> order(h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    GgufTensor& t = h.tensors[i];
    const uint64_t begin = relative[i];
    if (begin > data_bytes || t.bytes > data_bytes - begin)
      corrupt(source, tensor_field(t.name, "offset"),
              "[" + std::to_string(begin) + ", +" + std::to_string(t.bytes) + ") passes the end of the file's data (" +
                  std::to_string(data_bytes) + " bytes at byte " + std::to_string(h.data_start) + ")");
    t.offset = h.data_start + begin;
    order[i] = i;
  }
  // No two tensors share a byte.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return h.tensors[a].offset < h.tensors[b].offset; });
  size_t last = SIZE_MAX;
  for (size_t i : order) {
    const GgufTensor& t = h.tensors[i];
    if (t.bytes == 0) continue;
    if (last != SIZE_MAX && t.offset < h.tensors[last].offset + h.tensors[last].bytes)
      corrupt(source, tensor_field(t.name, "offset"), "overlaps tensor '" + printable(h.tensors[last].name) + "'");
    if (last == SIZE_MAX || t.offset + t.bytes > h.tensors[last].offset + h.tensors[last].bytes) last = i;
  }
  return h;
}

sw_dtype_t gguf_tensor_dtype(const GgufTensor& t, const std::string& source) {
  if (t.type->dtype == SW_DTYPE_INVALID)
    unsupported(source, tensor_field(t.name, "type"),
                std::string("unsupported dtype: ggml type ") + t.type->name +
                    " has no StrideWeave dtype (F32, F16, BF16, F64, I32, I64, Q8_0, Q4_0, Q4_K, Q6_K and "
                    "MXFP4 do)");
  return t.type->dtype;
}

namespace {

void put_le(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_string(std::string& out, const std::string& s) {
  put_le(out, s.size(), 8);
  out += s;
}

void put_value(std::string& out, const GgufValue& v) {
  if (v.type == static_cast<uint32_t>(GgufValueType::kString)) {
    put_string(out, v.text);
  } else if (v.type == static_cast<uint32_t>(GgufValueType::kArray)) {
    put_le(out, v.element_type, 4);
    put_le(out, v.count, 8);
    out += v.raw;
    for (const std::string& s : v.strings) put_string(out, s);
    for (const GgufValue& item : v.items) put_value(out, item);
  } else {
    put_le(out, v.bits, gguf_value_size(v.type));
  }
}

}  // namespace

std::string gguf_header(std::vector<GgufTensorOut>& tensors,
                        const std::vector<std::pair<std::string, GgufValue>>& metadata, uint32_t alignment) {
  std::string out = "GGUF";
  put_le(out, 3, 4);
  put_le(out, tensors.size(), 8);
  const bool add_alignment = alignment != kGgufDefaultAlignment;
  put_le(out, metadata.size() + (add_alignment ? 1 : 0), 8);
  for (const auto& [key, value] : metadata) {
    put_string(out, key);
    put_le(out, value.type, 4);
    put_value(out, value);
  }
  if (add_alignment) {
    put_string(out, "general.alignment");
    put_le(out, static_cast<uint32_t>(GgufValueType::kUint32), 4);
    put_le(out, alignment, 4);
  }
  uint64_t at = 0;
  for (GgufTensorOut& t : tensors) {
    put_string(out, t.name);
    put_le(out, t.ne.size(), 4);
    for (int64_t e : t.ne) put_le(out, static_cast<uint64_t>(e), 8);
    put_le(out, t.type->id, 4);
    put_le(out, at, 8);
    t.offset = at;
    at = (at + t.bytes + alignment - 1) / alignment * alignment;
  }
  out.append((alignment - out.size() % alignment) % alignment, '\0');
  for (GgufTensorOut& t : tensors) t.offset += out.size();
  return out;
}

// ---- geometry -----------------------------------------------------------

FileTensorGeometry file_tensor_geometry(const std::vector<int64_t>& shape, bool row_major) {
  FileTensorGeometry g;
  const size_t r = shape.size();
  g.logical = shape;
  if (row_major) std::reverse(g.logical.begin(), g.logical.end());
  for (size_t i = 0; i < r; ++i) g.permutation.push_back(row_major ? r - 1 - i : i);
  g.tile = g.logical;
  g.grid.assign(r, 1);
  if (r >= 2) {
    g.grid[r - 1] = g.logical[r - 1];
    g.tile[r - 1] = 1;
  }
  return g;
}

}  // namespace sw
