#include <cstring>

#include "api/handle.hpp"

using namespace sw;
using namespace sw::api;

extern "C" {

SW_API sw_error_t* sw_layout_create(const int64_t* shape, const int64_t* stride, size_t rank,
                                    sw_layout_t** out_layout) {
  return guard([&] {
    require(out_layout, "out_layout");
    auto s = extents_arg(shape, rank, "shape");
    if (rank && !stride) value_error("stride must not be NULL when rank is " + std::to_string(rank));
    std::vector<int64_t> d(stride, stride + rank);
    *out_layout = to_handle<sw_layout_t>(Layout::flat(s, d));
  });
}

SW_API sw_error_t* sw_layout_dense(const int64_t* extents, size_t rank, sw_layout_t** out_layout) {
  return guard([&] {
    require(out_layout, "out_layout");
    *out_layout = to_handle<sw_layout_t>(Layout::dense(extents_arg(extents, rank, "extents")));
  });
}

SW_API sw_error_t* sw_layout_parse(const char* text, sw_layout_t** out_layout) {
  return guard([&] {
    require(text, "text");
    require(out_layout, "out_layout");
    *out_layout = to_handle<sw_layout_t>(Layout::parse(text));
  });
}

SW_API sw_error_t* sw_layout_group(const sw_layout_t* const* modes, size_t count, sw_layout_t** out_layout) {
  return guard([&] {
    require(out_layout, "out_layout");
    if (count && !modes) value_error("modes must not be NULL when count is " + std::to_string(count));
    std::vector<Mode> out;
    for (size_t i = 0; i < count; ++i) {
      const Layout* l = get<Layout>(modes[i], "modes[i]");
      if (l->rank() == 1)
        out.push_back(l->modes()[0]);
      else
        out.push_back(Mode::make_tuple(l->modes()));
    }
    *out_layout = to_handle<sw_layout_t>(Layout::make(std::move(out)));
  });
}

SW_API sw_error_t* sw_layout_permute(const sw_layout_t* layout, const size_t* perm, size_t rank,
                                     sw_layout_t** out_layout) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_layout, "out_layout");
    if (rank && !perm) value_error("perm must not be NULL when rank is " + std::to_string(rank));
    *out_layout = to_handle<sw_layout_t>(l->permute(std::vector<size_t>(perm, perm + rank)));
  });
}

SW_API void sw_layout_retain(sw_layout_t* layout) { retain_handle(layout); }
SW_API void sw_layout_release(sw_layout_t* layout) { release_handle(layout); }

SW_API sw_error_t* sw_layout_rank(const sw_layout_t* layout, size_t* out_rank) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_rank, "out_rank");
    *out_rank = l->rank();
  });
}

SW_API sw_error_t* sw_layout_extents(const sw_layout_t* layout, int64_t* out_extents, size_t capacity) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    if (l->rank() && !out_extents) value_error("out_extents must not be NULL");
    if (capacity < l->rank())
      value_error("capacity " + std::to_string(capacity) + " is less than the rank " + std::to_string(l->rank()));
    std::copy(l->extents().begin(), l->extents().end(), out_extents);
  });
}

SW_API sw_error_t* sw_layout_size(const sw_layout_t* layout, int64_t* out_size) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_size, "out_size");
    *out_size = l->size();
  });
}

SW_API sw_error_t* sw_layout_cosize(const sw_layout_t* layout, int64_t* out_cosize) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_cosize, "out_cosize");
    *out_cosize = l->cosize();
  });
}

SW_API sw_error_t* sw_layout_is_injective(const sw_layout_t* layout, bool* out_injective) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_injective, "out_injective");
    *out_injective = l->is_injective();
  });
}

SW_API sw_error_t* sw_layout_equal(const sw_layout_t* a, const sw_layout_t* b, bool* out_equal) {
  return guard([&] {
    const Layout* la = get<Layout>(a, "a");
    const Layout* lb = get<Layout>(b, "b");
    require(out_equal, "out_equal");
    *out_equal = la->equals(*lb);
  });
}

SW_API sw_error_t* sw_layout_index(const sw_layout_t* layout, const int64_t* coord, size_t count,
                                   int64_t* out_index) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_index, "out_index");
    if (count && !coord) value_error("coord must not be NULL when count is " + std::to_string(count));
    *out_index = l->index(coord, count);
  });
}

SW_API sw_error_t* sw_layout_encode(const sw_layout_t* layout, const int64_t* coord, size_t count,
                                    int64_t* out_ordinal) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_ordinal, "out_ordinal");
    if (count && !coord) value_error("coord must not be NULL when count is " + std::to_string(count));
    *out_ordinal = l->encode(coord, count);
  });
}

SW_API sw_error_t* sw_layout_decode(const sw_layout_t* layout, int64_t ordinal, int64_t* out_coord,
                                    size_t capacity) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    if (l->rank() && !out_coord) value_error("out_coord must not be NULL");
    if (capacity < l->rank())
      value_error("capacity " + std::to_string(capacity) + " is less than the rank " + std::to_string(l->rank()));
    std::vector<int64_t> c(l->rank());
    l->decode(ordinal, c.data());
    std::copy(c.begin(), c.end(), out_coord);
  });
}

SW_API sw_error_t* sw_layout_to_string(const sw_layout_t* layout, char* buffer, size_t capacity,
                                       size_t* out_length) {
  return guard([&] {
    const Layout* l = get<Layout>(layout, "layout");
    require(out_length, "out_length");
    const std::string s = l->to_string();
    *out_length = s.size();
    if (!buffer && capacity == 0) return;
    if (!buffer) value_error("buffer must not be NULL when capacity is " + std::to_string(capacity));
    if (capacity < s.size() + 1)
      value_error("buffer of " + std::to_string(capacity) + " bytes cannot hold the " + std::to_string(s.size() + 1) +
                  " bytes of the layout text");
    std::memcpy(buffer, s.c_str(), s.size() + 1);
  });
}

}  // extern "C"
