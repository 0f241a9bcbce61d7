// GGUF reader: ggml's gguf parser for key-values and tensor infos, our mmap for the data.
#include <memory>

#include <gguf.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/tensor_readers.h"

namespace parlance::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct GgufFree {
    void operator()(gguf_context* ctx) const { gguf_free(ctx); }
};

// One array element of a numeric gguf type as JSON.
json array_element(gguf_type type, const void* data, size_t i) {
    switch (type) {
        case GGUF_TYPE_UINT8: return static_cast<const uint8_t*>(data)[i];
        case GGUF_TYPE_INT8: return static_cast<const int8_t*>(data)[i];
        case GGUF_TYPE_UINT16: return static_cast<const uint16_t*>(data)[i];
        case GGUF_TYPE_INT16: return static_cast<const int16_t*>(data)[i];
        case GGUF_TYPE_UINT32: return static_cast<const uint32_t*>(data)[i];
        case GGUF_TYPE_INT32: return static_cast<const int32_t*>(data)[i];
        case GGUF_TYPE_FLOAT32: return static_cast<const float*>(data)[i];
        case GGUF_TYPE_BOOL: return static_cast<const int8_t*>(data)[i] != 0;
        case GGUF_TYPE_UINT64: return static_cast<const uint64_t*>(data)[i];
        case GGUF_TYPE_INT64: return static_cast<const int64_t*>(data)[i];
        case GGUF_TYPE_FLOAT64: return static_cast<const double*>(data)[i];
        default: return nullptr;
    }
}

json kv_value(const gguf_context* ctx, int64_t id) {
    switch (gguf_get_kv_type(ctx, id)) {
        case GGUF_TYPE_UINT8: return gguf_get_val_u8(ctx, id);
        case GGUF_TYPE_INT8: return gguf_get_val_i8(ctx, id);
        case GGUF_TYPE_UINT16: return gguf_get_val_u16(ctx, id);
        case GGUF_TYPE_INT16: return gguf_get_val_i16(ctx, id);
        case GGUF_TYPE_UINT32: return gguf_get_val_u32(ctx, id);
        case GGUF_TYPE_INT32: return gguf_get_val_i32(ctx, id);
        case GGUF_TYPE_FLOAT32: return gguf_get_val_f32(ctx, id);
        case GGUF_TYPE_BOOL: return gguf_get_val_bool(ctx, id);
        case GGUF_TYPE_STRING: return std::string(gguf_get_val_str(ctx, id));
        case GGUF_TYPE_UINT64: return gguf_get_val_u64(ctx, id);
        case GGUF_TYPE_INT64: return gguf_get_val_i64(ctx, id);
        case GGUF_TYPE_FLOAT64: return gguf_get_val_f64(ctx, id);
        case GGUF_TYPE_ARRAY: {
            const gguf_type elem = gguf_get_arr_type(ctx, id);
            const size_t n = gguf_get_arr_n(ctx, id);
            json arr = json::array();
            if (elem == GGUF_TYPE_STRING) {
                arr.get_ref<json::array_t&>().reserve(n);
                for (size_t i = 0; i < n; ++i) arr.push_back(std::string(gguf_get_arr_str(ctx, id, i)));
            } else if (elem != GGUF_TYPE_ARRAY) {
                const void* data = gguf_get_arr_data(ctx, id);
                for (size_t i = 0; i < n; ++i) arr.push_back(array_element(elem, data, i));
            }  // nested arrays: ggml's gguf does not expose their contents; kept empty
            return arr;
        }
        default: return nullptr;
    }
}

}  // namespace

std::unique_ptr<TensorStore> read_gguf(const fs::path& file) {
    auto mapped = std::make_shared<MappedFile>(file);  // NotFound / Io before ggml sees the path
    gguf_init_params params{};
    params.no_alloc = true;
    params.ctx = nullptr;
    std::unique_ptr<gguf_context, GgufFree> ctx(gguf_init_from_file(file.c_str(), params));
    if (!ctx) {
        throw Error(ErrorKind::InvalidModel,
                    file.string() + ": not a valid GGUF file (truncated, corrupt or unknown version)");
    }
    json metadata = json::object();
    const int64_t n_kv = gguf_get_n_kv(ctx.get());
    for (int64_t id = 0; id < n_kv; ++id) metadata[gguf_get_key(ctx.get(), id)] = kv_value(ctx.get(), id);

    const size_t data_offset = gguf_get_data_offset(ctx.get());
    const int64_t n_tensors = gguf_get_n_tensors(ctx.get());
    std::vector<TensorInfo> tensors;
    tensors.reserve(static_cast<size_t>(n_tensors));
    for (int64_t id = 0; id < n_tensors; ++id) {
        const std::string name = gguf_get_tensor_name(ctx.get(), id);
        const ggml_type type = gguf_get_tensor_type(ctx.get(), id);
        const int64_t* ne = gguf_get_tensor_ne(ctx.get(), id);
        const size_t offset = data_offset + gguf_get_tensor_offset(ctx.get(), id);
        const size_t nbytes = gguf_get_tensor_size(ctx.get(), id);
        if (!is_valid_ggml_type(type)) {
            throw Error(ErrorKind::InvalidModel, file.string() + ": tensor " + name + ": invalid type " +
                                                     std::to_string(static_cast<int>(type)));
        }
        if (offset > mapped->size() || nbytes > mapped->size() - offset) {
            throw Error(ErrorKind::InvalidModel,
                        file.string() + ": tensor " + name + ": data at offset " + std::to_string(offset) +
                            " (+" + std::to_string(nbytes) + " bytes) lies beyond the end of the file (" +
                            std::to_string(mapped->size()) + " bytes)");
        }
        // ggml ne[] is innermost first; drop trailing 1s beyond the stored rank.
        int n_dims = GGML_MAX_DIMS;
        while (n_dims > 1 && ne[n_dims - 1] == 1) --n_dims;
        std::vector<int64_t> shape;
        for (int d = n_dims - 1; d >= 0; --d) shape.push_back(ne[d]);
        tensors.push_back(TensorInfo{name, type, std::move(shape), mapped->data() + offset, nbytes,
                                     file.string()});
    }
    return std::make_unique<TensorStore>(FileFormat::Gguf, std::vector<std::shared_ptr<MappedFile>>{mapped},
                                         std::move(tensors), std::move(metadata));
}

}  // namespace parlance::detail
