/* torch_model.cpp - torch_model.h with libtorch: the project's one C++ source.
 *
 * Why C++ here and nowhere else: TorchScript's loader and interpreter exist only as libtorch's C++
 * API.  This file keeps all of it behind torch_model.h's C functions, so the rest of the worker stays
 * C11, and it is compiled only when meson finds libtorch (option `torch`; torch_model_stub.c
 * otherwise).
 *
 * Rules of this file:
 * - nothing throws across the C boundary: every function catches c10::Error, std::exception and
 *   anything else, and turns it into err (the first line of the message: c10's what() carries a
 *   C++ backtrace after it);
 * - inputs are wrapped with torch::from_blob (no copy: the caller's buffers must outlive the
 *   forward; a model that writes its inputs in place writes the caller's buffer), outputs are
 *   copied into xmalloc'd buffers the C side frees with tm_tensors_free;
 * - the model runs in eval mode under torch::NoGradGuard (no autograd graph is recorded; not
 *   InferenceMode, which TorchScript's profiling executor in 1.13 does not fully support);
 * - libtorch's thread pools are process-wide: tm_load sets the intra-op pool to `threads` (the
 *   replica's cores; the last load wins), once per process the inter-op pool to 1 thread (a
 *   replica runs one forward at a time, so inter-op parallelism would only compete for the same
 *   cores), and OpenBLAS's own pool to 1 thread (set_threads says why). */
#include "workers/serve/torch_model.h"

#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/custom_class.h>
#include <torch/script.h>

#include <algorithm>
#include <cerrno>
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

extern "C" {
#include "common/alloc.h"
#include "workers/serve/tscode.h"
}

struct tm_model {
    torch::jit::script::Module module;
    size_t nargs_min, nargs_max; /* forward's tensor arguments (self excluded), with and without defaults */
};

/* The line of an exception's message that says what went wrong, cut to err_len: the first line,
 * except for an exception raised while TorchScript ran, whose message starts with the interpreter's
 * traceback ("The following operation failed in the TorchScript interpreter.", "Traceback of
 * TorchScript ...", indented code lines) and ends with the original error ("RuntimeError: mat1 and
 * mat2 shapes cannot be multiplied (2x4 and 3x2)"): there the first line after the last traceback. */
static void set_err(char *err, size_t err_len, const std::string &msg)
{
    if (!err || !err_len) return;
    size_t start = 0, tb = msg.rfind("\nTraceback of TorchScript");
    if (tb != std::string::npos) {
        for (size_t p = msg.find('\n', tb + 1); p != std::string::npos && p + 1 < msg.size(); p = msg.find('\n', p + 1))
            if (msg[p + 1] != ' ' && msg[p + 1] != '\n') {
                start = p + 1;
                break;
            }
    }
    size_t end = msg.find('\n', start);
    if (end == std::string::npos) end = msg.size();
    while (end > start && (msg[end - 1] == ' ' || msg[end - 1] == '\r'))
        end--;
    size_t n = std::min(end - start, err_len - 1);
    memcpy(err, msg.data() + start, n);
    err[n] = '\0';
}

/* Runs f; any exception becomes err and the result fail */
template <typename T, typename F> static T guarded(char *err, size_t err_len, T fail, F f)
{
    try {
        return f();
    } catch (const c10::Error &e) {
        set_err(err, err_len, e.what_without_backtrace());
    } catch (const std::exception &e) {
        set_err(err, err_len, e.what());
    } catch (...) {
        set_err(err, err_len, "unknown C++ exception in libtorch");
    }
    return fail;
}

/* the scalar types of sig_dtype, in its order (SIG_FP32 = 0, ...) */
static const c10::ScalarType scalar_of[] = {torch::kFloat32, torch::kFloat64, torch::kInt32, torch::kInt64};
static const int ndtypes = (int)(sizeof(scalar_of) / sizeof(scalar_of[0]));
static_assert(SIG_FP32 == 0 && SIG_FP64 == 1 && SIG_INT32 == 2 && SIG_INT64 == 3, "scalar_of follows sig_dtype");

/* the sig_dtype of a tensor's scalar type; -1 for the others */
static int dtype_of(c10::ScalarType s)
{
    for (int d = 0; d < ndtypes; d++)
        if (scalar_of[d] == s) return d;
    return -1;
}

static void set_threads(int threads)
{
    static std::once_flag interop_once;
    std::call_once(interop_once, [] {
        try {
            at::set_num_interop_threads(1);
        } catch (const std::exception &) {
            /* the pool already ran work (another library's forward): keep its size */
        }
    });
    if (threads > 0) at::set_num_threads(threads);
    /* Debian's libtorch calls OpenBLAS for some products, and OpenBLAS (the pthreads build) keeps its
     * own pool of one thread per core beside libtorch's OpenMP pool: two pools on the same cores,
     * OpenBLAS's spinning on sched_yield.  libtorch's intra-op pool is the parallelism, so BLAS gets
     * one thread: ResNet-18 at batch 1 on 2 cores, 20-25% more samples/s and p99 ~40 ms instead of
     * ~120 (build/tests/bench/torch_inproc, OPENBLAS_NUM_THREADS=1 against the default).  Looked up
     * at run time: another BLAS has no such call, and nothing changes. */
    if (auto blas_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) blas_threads(1);
}

extern "C" bool tm_available(void)
{
    return true;
}

/* What a served model may run (docs/inference.md, "Model checks").  A replica's process can reach
 * more than the model should (the sandboxed replica process of issue 27 is the boundary; this is
 * defence in depth inside it), and an uploaded model is attacker's code: TorchScript has ops that
 * read and write files (aten::from_file, aten::save), that hand out uninitialised memory
 * (aten::empty and kin, resize_), that skip their bounds checks (the *_unsafe constructors,
 * segment_reduce's unsafe=True) or crash (_efficientzerotensor), and a module may run code while
 * it is unpickled (__setstate__).  So before the load the archive's source is bounded (tscode.h:
 * no __setstate__, nesting at most 200 deep), and after it every method of every module and
 * class, every function of the model's compilation unit and every function or method they call
 * must use only the ops below, and every tensor the model holds must be a dense CPU tensor its
 * storage covers.  The first op or tensor that is not is named, with the method or attribute,
 * and the model is refused before its forward runs.  Not covered: a bug in libtorch's loader or
 * in an allowed op; time and memory (an endless loop, torch.zeros(2**36)): the sandbox's. */

/* Ops that are refused whatever the tables below say, with why; checked first, so the message
 * names the danger and an op added to the tables by mistake stays refused.  "*x" matches names
 * ending with x, "x*" names starting with it, "*x*" names containing it. */
struct denied_rule {
    const char *pattern, *why;
};
static const denied_rule denied_rules[] = {
    {"*_unsafe", "it skips its bounds checks"},
    {"*resize*", "uninitialised memory"},
    {"*empty*", "uninitialised memory"},
    {"set_", "it points a tensor at any storage"},
    {"as_strided*", "a view the op does not bound"},
    {"_efficientzerotensor", "a tensor without storage that crashes the ops it reaches"},
    {"from_file", "file access"},
    {"save", "file access"},
    {"load", "file access"},
    {"*sparse*", "sparse tensors are built from unchecked indices"},
    {"to_dense", "sparse, mkldnn and nested layouts are refused"},
    {"*mkldnn*", "sparse, mkldnn and nested layouts are refused"},
    {"*quantize*", "quantized tensors are refused"},
    {"_nested_from*", "nested tensors from raw buffers"},
    {"_nested_view*", "nested tensors from raw buffers"},
    {"_nested_tensor_from_tensor_list", "nested tensors are built only from a mask"},
    {"wait", "asynchronous execution (torch.jit.fork, torch.jit.wait)"},
};

/* prim:: nodes a model may hold: the language itself (control flow, constants, calls, attributes,
 * lists, tuples, dicts, objects, casts), scalars and tensor properties.  prim::CallFunction and
 * prim::CallMethod are followed into their target (a call on an interface type is refused: its
 * target is only known when it runs); refused by not being here: prim::fork, prim::rpc_*,
 * prim::Print, prim::PythonOp, prim::profile*, prim::*Group. */
// clang-format off
static const char *const allowed_prim[] = {
    /* control flow, calls, constants */
    "CallFunction", "CallMethod", "Constant", "If", "Loop", "RaiseException", "Uninitialized", "Enter", "Exit",
    /* module and object attributes, objects, isinstance and casts of optionals and unions */
    "CreateObject", "GetAttr", "SetAttr", "isinstance", "unchecked_cast", "unchecked_unwrap_optional",
    /* lists, tuples, dicts, enums, strings */
    "DictConstruct", "DictIndex", "EnumName", "EnumValue", "ListConstruct", "ListUnpack", "StringIndex", "TupleConstruct",
    "TupleIndex", "TupleSlice", "TupleUnpack", "tolist",
    /* scalars and tensor properties */
    "NumToTensor", "abs", "data", "device", "dtype", "is_cpu", "is_cuda", "is_meta", "is_mkldnn", "is_nested",
    "is_quantized", "is_sparse", "is_xpu", "layout", "max", "min", "name", "requires_grad", "shape",
};
// clang-format on

/* aten:: ops a model may call, by name (every overload; an in-place NAME_ also, unless refused
 * above).  Pure functions of their tensor arguments that check their indices and shapes; tensors
 * are created only initialised (zeros, ones, full, arange, random) and of the sizes asked for
 * (a huge size is the sandbox's memory limit's). */
// clang-format off
static const char *const allowed_aten[] = {
    /* TorchScript's Python builtins on ints, floats, bools, strings, lists and dicts */
    "Bool", "ComplexImplicit", "Float", "FloatImplicit", "Int", "IntImplicit", "ScalarImplicit", "__and__", "__contains__",
    "__derive_index", "__getitem__", "__interpolate", "__is__", "__isnot__", "__lshift__", "__not__", "__or__",
    "__range_length", "__round_to_zero_floordiv", "__rshift__", "__upsample", "__upsample_bilinear", "__xor__", "_set_item",
    "append", "bin", "capitalize", "ceil", "chr", "clear", "copy", "count", "dict", "divmod", "endswith", "extend", "find",
    "floor", "floordiv", "format", "get", "hash", "index", "insert", "isalnum", "isalpha", "isdigit", "islower", "isspace",
    "isupper", "items", "join", "keys", "len", "list", "ljust", "lower", "lstrip", "mathremainder", "ord", "pop", "remove",
    "replace", "reverse", "rjust", "rstrip", "setdefault", "sort", "sorted", "split", "splitlines", "startswith", "str",
    "strip", "update", "upper", "values", "warn",
    /* tensor properties and the autograd/autocast state */
    "dim", "element_size", "is_autocast_cpu_enabled", "is_autocast_enabled", "is_complex", "is_contiguous",
    "is_floating_point", "is_grad_enabled", "is_nonzero", "is_same_size", "is_signed", "item", "numel", "requires_grad",
    "size", "stride",
    /* tensor creation: initialised, of the sizes asked for */
    "arange", "bernoulli", "eye", "full", "full_like", "linspace", "logspace", "multinomial", "new_full", "new_ones",
    "new_zeros", "normal", "ones", "ones_like", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like",
    "randperm", "scalar_tensor", "tensor", "tril_indices", "triu_indices", "uniform", "zero", "zeros", "zeros_like",
    /* conversions and copies */
    "bool", "byte", "char", "clone", "contiguous", "detach", "double", "float", "half", "int", "long", "short", "to",
    "type_as",
    /* shapes and views (each checks its sizes against its input's) */
    "broadcast_tensors", "broadcast_to", "cat", "chunk", "column_stack", "concat", "diag", "diag_embed", "diagonal",
    "dsplit", "expand", "expand_as", "flatten", "flip", "fliplr", "flipud", "hsplit", "hstack", "meshgrid", "movedim",
    "moveaxis", "narrow", "numpy_T", "permute", "ravel", "repeat", "repeat_interleave", "reshape", "reshape_as", "roll",
    "rot90", "select", "slice", "split_with_sizes", "squeeze", "stack", "swapaxes", "swapdims", "t", "tensor_split", "tile",
    "transpose", "tril", "triu", "unbind", "unflatten", "unfold", "unsqueeze", "view", "view_as", "vsplit", "vstack",
    /* indexing, gathering, scattering (indices bounds-checked) */
    "bucketize", "fill", "gather", "index_add", "index_copy", "index_fill", "index_put", "index_select", "masked_fill",
    "masked_scatter", "masked_select", "nonzero", "put", "scatter", "scatter_add", "scatter_reduce", "searchsorted", "take",
    "take_along_dim", "where",
    /* elementwise math */
    "absolute", "acos", "acosh", "add", "addcdiv", "addcmul", "angle", "arccos", "arcsin", "arctan", "arctan2", "asin",
    "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "clamp", "clamp_max",
    "clamp_min", "clip", "copysign", "cos", "cosh", "deg2rad", "digamma", "div", "divide", "erf", "erfc", "erfinv", "exp",
    "exp2", "expm1", "fix", "float_power", "floor_divide", "fmax", "fmin", "fmod", "frac", "hypot", "i0", "lerp", "lgamma",
    "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2", "logit", "maximum", "minimum", "mul", "multiply",
    "nan_to_num", "neg", "negative", "pow", "rad2deg", "reciprocal", "remainder", "round", "rsqrt", "rsub", "sgn", "sign",
    "signbit", "sin", "sinc", "sinh", "sqrt", "square", "sub", "subtract", "tan", "true_divide", "trunc", "xlogy",
    /* comparisons and logic */
    "allclose", "eq", "equal", "ge", "greater", "greater_equal", "gt", "isclose", "isfinite", "isinf", "isnan", "isneginf",
    "isposinf", "le", "less", "less_equal", "logical_and", "logical_not", "logical_or", "logical_xor", "lt", "ne",
    "not_equal",
    /* reductions, sorting, scans */
    "all", "amax", "amin", "aminmax", "any", "argmax", "argmin", "argsort", "count_nonzero", "cummax", "cummin", "cumprod",
    "cumsum", "dist", "histc", "kthvalue", "logcumsumexp", "logsumexp", "max", "mean", "median", "min", "mode", "nanmean",
    "nanmedian", "nansum", "norm", "prod", "std", "std_mean", "sum", "topk", "unique_consecutive", "unique_dim", "var",
    "var_mean", "_unique2",
    /* linear algebra */
    "addbmm", "addmm", "addmv", "addr", "baddbmm", "bilinear", "bmm", "cdist", "chain_matmul", "cross", "det", "dot",
    "einsum", "frobenius_norm", "ger", "inner", "inverse", "kron", "linalg_det", "linalg_inv", "linalg_matrix_norm",
    "linalg_norm", "linalg_solve", "linalg_vector_norm", "linear", "matmul", "mm", "mv", "outer", "pinverse", "tensordot",
    "trace", "vdot",
    /* neural network layers and activations (torch.nn.functional) */
    "_convolution", "_native_multi_head_attention", "_softmax", "_transformer_encoder_layer_fwd", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "alpha_dropout", "avg_pool1d", "avg_pool2d", "avg_pool3d", "batch_norm", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "celu", "channel_shuffle", "constant_pad_nd", "conv1d", "conv2d", "conv3d",
    "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution", "cosine_embedding_loss",
    "cosine_similarity", "cross_entropy_loss", "dropout", "elu", "embedding", "feature_alpha_dropout", "feature_dropout",
    "gelu", "glu", "group_norm", "gru", "gru_cell", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "huber_loss",
    "instance_norm", "kl_div", "l1_loss", "layer_norm", "leaky_relu", "log_sigmoid", "log_softmax", "logsigmoid", "lstm",
    "lstm_cell", "margin_ranking_loss", "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices",
    "max_pool3d", "max_pool3d_with_indices", "mish", "mse_loss", "nll_loss", "nll_loss2d", "nll_loss_nd", "one_hot", "pad",
    "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "prelu", "reflection_pad1d", "reflection_pad2d",
    "reflection_pad3d", "relu", "relu6", "replication_pad1d", "replication_pad2d", "replication_pad3d", "rnn_relu",
    "rnn_relu_cell", "rnn_tanh", "rnn_tanh_cell", "rrelu", "selu", "sigmoid", "silu", "smooth_l1_loss", "soft_margin_loss",
    "softmax", "softmin", "softplus", "softshrink", "softsign", "tanh", "tanhshrink", "threshold", "triplet_margin_loss",
    "upsample_bicubic2d", "upsample_bilinear2d", "upsample_linear1d", "upsample_nearest1d", "upsample_nearest2d",
    "upsample_nearest3d", "upsample_trilinear3d",
    /* nn.TransformerEncoder's fast path: a nested tensor built from a dense one and a boolean mask
     * whose shapes the op checks, and turned back into a dense one (the raw-buffer constructors
     * are refused above) */
    "_nested_tensor_from_mask", "_nested_tensor_from_mask_left_aligned", "to_padded_tensor",
};
// clang-format on

/* whether name matches one of denied_rules' patterns */
static bool matches(const std::string &name, const char *pattern)
{
    std::string p(pattern);
    bool head = p.front() == '*', tail = p.back() == '*';
    std::string core = p.substr(head ? 1 : 0, p.size() - (head ? 1 : 0) - (tail ? 1 : 0));
    if (head && tail) return name.find(core) != std::string::npos;
    if (head) return name.size() >= core.size() && name.compare(name.size() - core.size(), core.size(), core) == 0;
    if (tail) return name.compare(0, core.size(), core) == 0;
    return name == core;
}

/* The walk over a loaded model: its objects (modules and classes, their attributes), and the
 * functions to check, each once. */
class model_check
{
  public:
    explicit model_check(const torch::jit::script::Module &root) : root_(root)
    {
        for (const char *n : allowed_prim)
            prim_.insert(n);
        for (const char *n : allowed_aten)
            aten_.insert(n);
    }

    void run()
    {
        /* the module tree first (its methods, from forward down), then everything else the
         * compilation unit holds: functions no method reaches, classes no attribute holds */
        check_value(root_._ivalue(), short_name(root_.type()->name()->qualifiedName()));
        for (torch::jit::Function *f : root_._ivalue()->compilation_unit()->get_functions())
            add(f);
        for (size_t i = 0; i < todo_.size(); i++) /* in the order found: the root's methods first */
            check_function(*todo_[i]);
    }

  private:
    const torch::jit::script::Module &root_;
    std::unordered_set<std::string> prim_, aten_;
    std::unordered_set<const void *> seen_;
    std::vector<torch::jit::Function *> todo_;

    static std::string short_name(const std::string &q)
    {
        static const std::string torch_prefix = "__torch__.";
        return q.compare(0, torch_prefix.size(), torch_prefix) == 0 ? q.substr(torch_prefix.size()) : q;
    }

    void add(torch::jit::Function *f)
    {
        if (f && seen_.insert(f).second) todo_.push_back(f);
    }

    void add_class(const c10::ClassTypePtr &cls)
    {
        if (!seen_.insert(cls.get()).second) return;
        for (torch::jit::Function *f : cls->methods())
            add(f);
    }

    [[noreturn]] static void refuse_op(const std::string &op, const std::string &fn, const std::string &why)
    {
        throw std::runtime_error("the model calls " + op + " in " + fn + ": not allowed (" + why +
                                 "; docs/inference.md, \"Model checks\")");
    }

    [[noreturn]] static void refuse_tensor(const std::string &name, const std::string &why)
    {
        throw std::runtime_error("the model's tensor " + name + " " + why + ": refused (docs/inference.md, \"Model checks\")");
    }

    static void check_tensor(const at::Tensor &t, const std::string &name)
    {
        if (!t.defined()) return;
        if (t.layout() != c10::kStrided || t.is_sparse() || t.is_mkldnn() || t.is_nested())
            refuse_tensor(name, "is not a dense strided tensor (layout " + c10::str(t.layout()) + ")");
        if (t.is_quantized()) refuse_tensor(name, "is quantized");
        if (!t.device().is_cpu()) refuse_tensor(name, "is not on the CPU (" + t.device().str() + ")");
        if (t._is_zerotensor()) refuse_tensor(name, "is a zero tensor without storage");
        static const c10::ScalarType dtypes[] = {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16, torch::kUInt8,
                                                 torch::kInt8,    torch::kInt16,   torch::kInt32,   torch::kInt64,    torch::kBool};
        if (std::find(std::begin(dtypes), std::end(dtypes), t.scalar_type()) == std::end(dtypes))
            refuse_tensor(name, std::string("has datatype ") + c10::toString(t.scalar_type()) + ", which a model may not hold");
        if (!t.has_storage()) refuse_tensor(name, "has no storage");
        int64_t offset = t.storage_offset();
        if (offset < 0) refuse_tensor(name, "has a negative storage offset");
        for (int64_t d = 0; d < t.dim(); d++)
            if (t.stride(d) < 0 || t.size(d) < 0) refuse_tensor(name, "has a negative size or stride");
        if (t.numel() == 0) return;
        /* the last byte it addresses: (offset + sum (size - 1) * stride + 1) * itemsize */
        uint64_t last = (uint64_t)offset, term;
        bool over = false;
        for (int64_t d = 0; d < t.dim(); d++) {
            over |= __builtin_mul_overflow((uint64_t)(t.size(d) - 1), (uint64_t)t.stride(d), &term);
            over |= __builtin_add_overflow(last, term, &last);
        }
        uint64_t need = 0;
        over |= __builtin_add_overflow(last, (uint64_t)1, &last);
        over |= __builtin_mul_overflow(last, (uint64_t)t.element_size(), &need);
        uint64_t have = t.storage().nbytes();
        if (over || need > have)
            refuse_tensor(name, "addresses " + (over ? std::string("more than 2^64") : std::to_string(need)) +
                                    " bytes of its storage, which holds " + std::to_string(have));
    }

    /* an attribute, a constant or an element of one: tensors checked, objects walked */
    void check_value(const c10::IValue &v, const std::string &name)
    {
        if (v.isTensor()) {
            check_tensor(v.toTensor(), name);
        } else if (v.isTensorList()) {
            c10::List<at::Tensor> l = v.toTensorList();
            for (size_t i = 0; i < l.size(); i++)
                check_tensor(l.get(i), name + "[" + std::to_string(i) + "]");
        } else if (v.isList()) {
            c10::List<c10::IValue> l = v.toList();
            for (size_t i = 0; i < l.size(); i++)
                check_value(l.get(i), name + "[" + std::to_string(i) + "]");
        } else if (v.isTuple()) {
            const auto &e = v.toTupleRef().elements();
            for (size_t i = 0; i < e.size(); i++)
                check_value(e[i], name + "[" + std::to_string(i) + "]");
        } else if (v.isGenericDict()) {
            for (const auto &kv : v.toGenericDict()) {
                check_value(kv.key(), name + ".key");
                check_value(kv.value(), name + "[...]");
            }
        } else if (v.isObject()) {
            if (torch::isCustomClass(v))
                throw std::runtime_error("the model's attribute " + name + " is an object of the C++ class " + v.type()->str() +
                                         ", which a served model may not hold");
            c10::intrusive_ptr<c10::ivalue::Object> obj = v.toObject();
            if (!seen_.insert(obj.get()).second) return;
            c10::ClassTypePtr cls = obj->type();
            add_class(cls);
            for (size_t i = 0; i < obj->slots().size(); i++)
                check_value(obj->getSlot(i), name + "." + cls->getAttributeName(i));
        } else if (v.isFuture() || v.isRRef() || v.isCapsule() || v.isPyObject() || v.isQuantizer() || v.isStorage() ||
                   v.isGenerator() || v.isStream()) {
            throw std::runtime_error("the model's attribute " + name + " is a " + v.tagKind() +
                                     ", which a served model may not hold");
        }
    }

    void check_function(torch::jit::Function &f)
    {
        const std::string fn = short_name(f.qualname().qualifiedName());
        const std::string &base = f.qualname().name();
        if (base == "__setstate__" || base == "__getstate__")
            throw std::runtime_error("the model defines " + fn +
                                     ": a class with __setstate__ or __getstate__ runs code while it is loaded, not allowed "
                                     "(docs/inference.md, \"Model checks\")");
        torch::jit::GraphFunction *gf = torch::jit::tryToGraphFunction(f);
        if (!gf) throw std::runtime_error("the model's function " + fn + " is not TorchScript");
        check_block(gf->graph()->block(), fn);
    }

    void check_block(torch::jit::Block *block, const std::string &fn)
    {
        for (torch::jit::Node *node : block->nodes()) {
            check_node(node, fn);
            for (torch::jit::Block *sub : node->blocks())
                check_block(sub, fn);
        }
    }

    void check_node(torch::jit::Node *node, const std::string &fn)
    {
        const c10::Symbol kind = node->kind();
        const std::string op = kind.toQualString(), name = kind.toUnqualString();
        if (kind.is_prim()) {
            if (!prim_.count(name)) refuse_op(op, fn, "not an op of the allow list");
            if (kind == c10::prim::CallFunction) {
                c10::FunctionTypePtr ft = node->input(0)->type()->cast<c10::FunctionType>();
                if (!ft) refuse_op(op, fn, "a call of a function that is not known at load");
                add(ft->function());
            } else if (kind == c10::prim::CallMethod) {
                c10::ClassTypePtr cls = node->input(0)->type()->cast<c10::ClassType>();
                if (!cls)
                    refuse_op(op, fn,
                              "a call on the interface type " + node->input(0)->type()->str() +
                                  ", whose method is only known when it runs");
                add(cls->findMethod(node->s(c10::attr::name)));
            } else if (kind == c10::prim::Constant && node->outputs().size() == 1) {
                c10::optional<c10::IValue> v = torch::jit::toIValue(node->output());
                if (v) check_value(*v, "constant in " + fn);
            } else if (kind == c10::prim::CreateObject) {
                if (c10::ClassTypePtr cls = node->output()->type()->cast<c10::ClassType>()) add_class(cls);
            }
            return;
        }
        if (!kind.is_aten()) refuse_op(op, fn, "an op outside aten:: and prim::");
        for (const denied_rule &r : denied_rules)
            if (matches(name, r.pattern)) refuse_op(op, fn, r.why);
        for (const std::shared_ptr<torch::jit::Operator> &o : torch::jit::getAllOperatorsFor(kind))
            for (const c10::Argument &a : o->schema().arguments())
                if (a.name() == "unsafe") refuse_op(op, fn, "it has an argument `unsafe` that skips its checks");
        /* NAME_ is NAME in place; dunders (__and__) are themselves */
        std::string plain = name;
        if (plain.size() > 1 && plain.back() == '_' && plain[plain.size() - 2] != '_') plain.pop_back();
        if (!aten_.count(name) && !aten_.count(plain)) refuse_op(op, fn, "not an op of the allow list");
    }
};

/* tscode.h's bound on the archive's code/ ... .py records, before torch::jit::load parses them
 * (and runs a __setstate__) */
static void check_code(const char *path)
{
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string &rec : reader.getAllRecords()) {
        if (rec.compare(0, 5, "code/") != 0 || rec.size() < 8 || rec.compare(rec.size() - 3, 3, ".py") != 0) continue;
        at::DataPtr data;
        size_t size = 0;
        std::tie(data, size) = reader.getRecord(rec);
        char why[160];
        if (tscode_check(static_cast<const unsigned char *>(data.get()), size, why, sizeof why) != 0)
            throw std::runtime_error("the model's " + rec + " " + why +
                                     ": refused before torch::jit::load (docs/inference.md, \"Model checks\")");
    }
}

extern "C" tm_model *tm_load(const char *path, int threads, char *err, size_t err_len)
{
    return guarded<tm_model *>(err, err_len, nullptr, [&] {
        /* libtorch's own message for a missing file lacks strerror's text in 1.13 */
        FILE *f = fopen(path, "rb");
        if (!f) throw std::runtime_error(std::string(path) + ": " + strerror(errno));
        fclose(f);
        set_threads(threads);
        check_code(path);
        torch::jit::script::Module module = torch::jit::load(path, torch::kCPU);
        module.eval();
        model_check(module).run();
        const c10::FunctionSchema &schema = module.get_method("forward").function().getSchema();
        size_t nargs = schema.arguments().size() - 1, nmin = 0; /* arguments()[0] is self */
        for (size_t i = 1; i < schema.arguments().size(); i++)
            if (!schema.arguments()[i].default_value()) nmin = i;
        return new tm_model{std::move(module), nmin, nargs};
    });
}

/* the IValue of one C input, sharing its buffer */
static c10::IValue wrap_input(const tm_tensor &t, int i)
{
    int dtype; /* read as an int: a value outside the enum's is undefined behaviour in C++ */
    static_assert(sizeof(dtype) == sizeof(t.dtype), "sig_dtype is an int");
    memcpy(&dtype, &t.dtype, sizeof dtype);
    if (dtype < 0 || dtype >= ndtypes)
        throw std::invalid_argument("input " + std::to_string(i) + ": unknown datatype " + std::to_string(dtype));
    if (t.ndim < 0 || t.ndim > SIG_MAX_DIMS)
        throw std::invalid_argument("input " + std::to_string(i) + ": " + std::to_string(t.ndim) + " dimensions (at most " +
                                    std::to_string(SIG_MAX_DIMS) + ")");
    std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
    for (int64_t d : shape)
        if (d < 0) throw std::invalid_argument("input " + std::to_string(i) + ": negative dimension " + std::to_string(d));
    return torch::from_blob(t.data, shape, torch::TensorOptions().dtype(scalar_of[dtype]));
}

/* the tensors of forward's result: one tensor, or a tuple or list of them */
static std::vector<at::Tensor> output_tensors(const c10::IValue &r)
{
    if (r.isTensor()) return {r.toTensor()};
    std::vector<c10::IValue> items;
    if (r.isTuple())
        items = r.toTupleRef().elements().vec();
    else if (r.isList())
        items = r.toListRef().vec();
    else
        throw std::invalid_argument("the model returned a " + r.tagKind() + ", not a tensor or a tuple or list of tensors");
    std::vector<at::Tensor> ts;
    for (size_t i = 0; i < items.size(); i++) {
        if (!items[i].isTensor())
            throw std::invalid_argument("output " + std::to_string(i) + " is a " + items[i].tagKind() + ", not a tensor");
        ts.push_back(items[i].toTensor());
    }
    return ts;
}

/* copies one output into out (data malloc'd) */
static void copy_output(const at::Tensor &t0, int i, tm_tensor *out)
{
    int d = dtype_of(t0.scalar_type());
    if (d < 0)
        throw std::invalid_argument("output " + std::to_string(i) + " has datatype " + c10::toString(t0.scalar_type()) +
                                    " (served outputs are FP32, FP64, INT32 or INT64)");
    if (t0.dim() > SIG_MAX_DIMS)
        throw std::invalid_argument("output " + std::to_string(i) + " has " + std::to_string(t0.dim()) + " dimensions (at most " +
                                    std::to_string(SIG_MAX_DIMS) + ")");
    at::Tensor t = t0.to(torch::kCPU).contiguous();
    out->dtype = (sig_dtype)d;
    out->ndim = (int)t.dim();
    for (int k = 0; k < out->ndim; k++)
        out->shape[k] = t.size(k);
    size_t bytes = (size_t)t.numel() * t.element_size();
    out->data = xmalloc(bytes);
    if (bytes) memcpy(out->data, t.data_ptr(), bytes);
}

extern "C" int tm_forward(tm_model *m, const tm_tensor *in, int n, tm_tensor **out, int *nout, char *err, size_t err_len)
{
    *out = nullptr;
    *nout = 0;
    std::vector<tm_tensor> res; /* what is copied so far, freed on an exception */
    int rc = guarded<int>(err, err_len, -1, [&] {
        if (n < 0 || (size_t)n < m->nargs_min || (size_t)n > m->nargs_max)
            throw std::invalid_argument("the model takes " +
                                        (m->nargs_min == m->nargs_max
                                             ? std::to_string(m->nargs_max)
                                             : std::to_string(m->nargs_min) + " to " + std::to_string(m->nargs_max)) +
                                        " inputs, not " + std::to_string(n));
        torch::NoGradGuard no_grad;
        std::vector<c10::IValue> args;
        for (int i = 0; i < n; i++)
            args.push_back(wrap_input(in[i], i));
        std::vector<at::Tensor> ts = output_tensors(m->module.forward(args));
        res.reserve(ts.size());
        for (size_t i = 0; i < ts.size(); i++) {
            res.push_back(tm_tensor{});
            copy_output(ts[i], (int)i, &res.back());
        }
        return 0;
    });
    if (rc < 0) {
        for (tm_tensor &t : res)
            free(t.data);
        return -1;
    }
    *out = (tm_tensor *)xmalloc(res.size() * sizeof(tm_tensor));
    if (!res.empty()) memcpy(*out, res.data(), res.size() * sizeof(tm_tensor));
    *nout = (int)res.size();
    return 0;
}

extern "C" void tm_tensors_free(tm_tensor *t, int n)
{
    if (!t) return;
    for (int i = 0; i < n; i++)
        free(t[i].data);
    free(t);
}

extern "C" void tm_free(tm_model *m)
{
    delete m;
}
