// dtype helpers: names, sizes, f16/bf16 conversion, quantized encode/decode.
#include "core/dtype.h"

#include <cmath>

#include "core_test_util.h"

namespace parlance {
namespace {

using testing::expect_error;
using testing::ramp;

TEST(Dtype, NamesAndSafetensorsMapping) {
    EXPECT_STREQ(dtype_name(GGML_TYPE_Q4_K), "q4_K");
    EXPECT_EQ(safetensors_dtype_name(GGML_TYPE_BF16).value(), "BF16");
    EXPECT_FALSE(safetensors_dtype_name(GGML_TYPE_Q8_0).has_value());
    EXPECT_EQ(ggml_type_from_safetensors("F16").value(), GGML_TYPE_F16);
    EXPECT_EQ(ggml_type_from_safetensors("I64").value(), GGML_TYPE_I64);
    EXPECT_FALSE(ggml_type_from_safetensors("BOOL").has_value());
    EXPECT_FALSE(is_valid_ggml_type(4));  // removed Q4_2
    EXPECT_FALSE(is_valid_ggml_type(GGML_TYPE_COUNT));
    EXPECT_TRUE(is_valid_ggml_type(GGML_TYPE_Q6_K));
}

TEST(Dtype, Sizes) {
    const int64_t shape[] = {3, 256};
    EXPECT_EQ(tensor_bytes(GGML_TYPE_F32, shape), 3u * 256 * 4);
    EXPECT_EQ(tensor_bytes(GGML_TYPE_Q8_0, shape), 3u * 8 * 34);
    EXPECT_EQ(tensor_bytes(GGML_TYPE_Q4_K, shape), 3u * 144);
    const int64_t bad[] = {2, 100};
    expect_error([&] { tensor_bytes(GGML_TYPE_Q4_K, bad); }, ErrorKind::InvalidModel, {"100", "q4_K"});
}

TEST(Dtype, HalfConversions) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(1.5f)), 1.5f);
    EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
    auto v = ramp(64);
    auto bytes = encode_f32(v, GGML_TYPE_BF16, 64);
    auto back = decode_to_f32(bytes.data(), GGML_TYPE_BF16, 64);
    for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], 1e-2);
}

TEST(Dtype, QuantizedRoundTrip) {
    auto v = ramp(512);
    for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}) {
        auto bytes = encode_f32(v, t, 256);
        EXPECT_EQ(bytes.size(), 2 * ggml_row_size(t, 256));
        auto back = decode_to_f32(bytes.data(), t, 512);
        double err = 0;
        for (size_t i = 0; i < v.size(); ++i) err = std::max(err, double(std::fabs(back[i] - v[i])));
        EXPECT_LT(err, t == GGML_TYPE_Q4_K ? 0.15 : 0.03) << dtype_name(t);
        EXPECT_GT(err, 0.0) << dtype_name(t);  // really quantized
    }
    expect_error([&] { encode_f32(v, GGML_TYPE_I32, 256); }, ErrorKind::Unsupported, {"i32"});
}

}  // namespace
}  // namespace parlance
