/* tsarchive.h - is an uploaded file a TorchScript archive, as torch.jit.save writes it?  The model
 * upload route (POST /v1/models/{name}/versions) asks before it stores anything, so a damaged file
 * or a torch.save pickle is refused with a message the client can act on, not at load time in a
 * replica.  Pure: reads the buffer, no I/O, no allocation but zlib's inflate state.
 *
 * What torch 1.13 writes (torch.jit.save, through its miniz-based PyTorchStreamWriter): a ZIP file
 * whose entries all live under one top-level folder (the file's base name, or "archive"): data.pkl,
 * constants.pkl, version, code/... (the TorchScript source, .py and .debug_pkl), data/N (tensors).
 * Tensors and pickles are stored (method 0, data aligned to 64 bytes by a local extra field); the
 * code/ files are deflated (method 8).  Every entry has general-purpose flag bit 3: the local header
 * holds zero CRC and sizes, a data descriptor "PK\7\8 crc csize usize" follows the data.  A ZIP64
 * end of central directory record and locator are always written (for a 45 MB ResNet-18 too), with
 * 32-bit fields that are not saturated; larger archives saturate them and use the ZIP64 values.
 *
 * What is checked, in order:
 * - The structure: the end of central directory record (ZIP64 when present) at the end of the
 *   buffer, the central directory inside it, each entry's local header where the central directory
 *   says, with the same name and method, and, without bit 3, the same CRC and sizes; with bit 3,
 *   its data descriptor (32- or 64-bit sizes, signature optional).  Entries must not overlap and
 *   come in file order (torch writes them so); a ZIP64 extra field supplies saturated sizes/offset.
 *   Multi-disk archives, encryption and methods other than 0 and 8 are refused.
 * - The CRC-32 (zlib) of every entry: a stored entry's bytes, a deflated entry's inflated bytes
 *   (inflated in 16 KiB pieces, never held whole), whose count must equal its size.  Deflated
 *   entries may expand to TSARCHIVE_MAX_INFLATED bytes in all (torch's code/ files are kilobytes),
 *   so a small upload cannot make the server inflate gigabytes.
 * - TorchScript: one top-level folder P shared by every entry, with P/data.pkl, P/constants.pkl
 *   and at least one P/code/ entry.  torch.save (a state_dict, or a whole nn.Module pickled) writes
 *   P/data.pkl without code/ and constants.pkl: refused with how to script the model instead.  A
 *   legacy (non-ZIP) torch.save pickle is named as such.
 * - The TorchScript source, P/code/ ... .py (stored or inflated bytes, as they are read): no
 *   definition of __setstate__ (torch::jit::load would run it), brackets and indentation nested at
 *   most TSCODE_MAX_DEPTH (200) deep (the loader's parser would overflow its stack):
 *   workers/serve/tscode.h, which the TorchScript loader applies again before it loads a file.
 * Every read is bounds-checked against len (tests/fuzz/fuzz_tsarchive.c); the work is linear in len
 * plus the inflated bytes.
 *
 * Messages are printable ASCII (an entry name's other bytes are shown as '?', long names cut with
 * "..."), at most msg_len bytes. */
#ifndef GANTRY_TSARCHIVE_H
#define GANTRY_TSARCHIVE_H

#include <stddef.h>

#define TSARCHIVE_MAX_INFLATED (64u << 20) /* bytes all deflated entries may expand to together */

/* 0 when buf[0..len) is a TorchScript archive; -1 with why not in msg (msg_len bytes; msg may be
 * NULL when msg_len is 0). */
int tsarchive_check(const unsigned char *buf, size_t len, char *msg, size_t msg_len);

#endif
