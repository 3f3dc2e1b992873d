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
 *   replica's cores; the last load wins) and, once per process, the inter-op pool to 1 thread (a
 *   replica runs one forward at a time, so inter-op parallelism would only compete for the same
 *   cores). */
#include "workers/serve/torch_model.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "common/alloc.h"
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
}

extern "C" bool tm_available(void)
{
    return true;
}

/* What a served model may run.  A replica runs in the worker process, which can read the worker's
 * state directory (other tenants' models and checkpoints, the cluster's secrets): TorchScript has
 * ops that read and write files (aten::from_file, aten::save) and ops that hand out uninitialised
 * memory (aten::empty and its kin: what an earlier job left in the heap).  A model whose forward,
 * with every method and function it calls inlined, uses one of them, or an op outside the aten::
 * and prim:: namespaces (profiler::, custom classes), is refused at load, naming the op.  What this
 * does not cover: a bug in libtorch's loader or in an op itself (a sandboxed replica process would;
 * docs/inference.md, "Security"). */
static const char *const denied_ops[] = {"aten::from_file",
                                         "aten::save",
                                         "aten::empty",
                                         "aten::empty_like",
                                         "aten::empty_strided",
                                         "aten::new_empty",
                                         "aten::new_empty_strided",
                                         "aten::resize_",
                                         "aten::resize_as_",
                                         "aten::_empty_affine_quantized",
                                         "aten::_empty_per_channel_affine_quantized",
                                         "aten::empty_quantized",
                                         nullptr};

static void check_ops(torch::jit::Block *block)
{
    for (torch::jit::Node *node : block->nodes()) {
        const c10::Symbol kind = node->kind();
        const char *name = kind.toQualString();
        bool ok = kind.is_aten() || kind.is_prim();
        for (const char *const *d = denied_ops; ok && *d; d++)
            if (!strcmp(name, *d)) ok = false;
        if (!ok)
            throw std::runtime_error(std::string("the model uses ") + name +
                                     ", which a served model may not (file access, uninitialised memory or an op outside "
                                     "aten:: and prim::)");
        for (torch::jit::Block *sub : node->blocks())
            check_ops(sub);
    }
}

static void check_model(torch::jit::script::Module &module)
{
    std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph);
    check_ops(graph->block());
}

extern "C" tm_model *tm_load(const char *path, int threads, char *err, size_t err_len)
{
    return guarded<tm_model *>(err, err_len, nullptr, [&] {
        /* libtorch's own message for a missing file lacks strerror's text in 1.13 */
        FILE *f = fopen(path, "rb");
        if (!f) throw std::runtime_error(std::string(path) + ": " + strerror(errno));
        fclose(f);
        set_threads(threads);
        torch::jit::script::Module module = torch::jit::load(path, torch::kCPU);
        module.eval();
        check_model(module);
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
