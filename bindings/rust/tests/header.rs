//! src/sys.rs against include/pixload.h: the same structs, fields, field types,
//! constants, enums, typedefs and function signatures (parsed from both files), and the
//! same sizes, alignments, offsets and values (the header compiled with gcc, next to
//! std::mem::size_of / align_of / offset_of! of the Rust declarations).
use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use pixload::sys::*;

fn header_path() -> PathBuf {
    let dir = env!("PIXLOAD_HEADER_DIR");
    assert!(!dir.is_empty(), "build.rs found no pixload.h: set PIXLOAD_INCLUDE_DIR");
    Path::new(dir).join("pixload.h")
}

// ---------------------------------------------------------------------------------
// The Rust side, as the compiler sees it
// ---------------------------------------------------------------------------------

/// (struct, size, align) and (struct.field, offset, size) of the listed structs. The
/// destructuring pattern has no `..`: a field of the Rust struct missing from the list
/// fails to compile, so the list is exactly the Rust struct's fields.
macro_rules! rust_layouts {
    ($($name:ident { $($field:ident),* $(,)? })*) => {{
        let mut structs = BTreeMap::new();
        let mut fields = BTreeMap::new();
        let mut order = BTreeMap::new();
        $({
            #[allow(unused)]
            fn exhaustive(value: $name) {
                let $name { $($field: _),* } = value;
            }
            structs.insert(stringify!($name).to_string(), (size_of::<$name>(), align_of::<$name>()));
            let mut names = Vec::new();
            $(
                let uninit = std::mem::MaybeUninit::<$name>::uninit();
                let base = uninit.as_ptr();
                // SAFETY: addr_of! computes the field's address without reading it.
                let field_size = size_of_pointee(unsafe { std::ptr::addr_of!((*base).$field) });
                fields.insert(format!("{}.{}", stringify!($name), stringify!($field)),
                              (offset_of!($name, $field), field_size));
                names.push(stringify!($field).to_string());
            )*
            order.insert(stringify!($name).to_string(), names);
        })*
        (structs, fields, order)
    }};
}

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

macro_rules! rust_constants {
    ($($name:ident),* $(,)?) => {{
        let mut map = BTreeMap::new();
        $( map.insert(stringify!($name).to_string(), $name as i64); )*
        map
    }};
}

macro_rules! rust_enums {
    ($($name:ident),* $(,)?) => {{
        let mut map = BTreeMap::new();
        $( map.insert(stringify!($name).to_string(), (size_of::<$name>(), <$name>::MIN != 0)); )*
        map
    }};
}

fn rust_side() -> (
    BTreeMap<String, (usize, usize)>,
    BTreeMap<String, (usize, usize)>,
    BTreeMap<String, Vec<String>>,
    BTreeMap<String, i64>,
    BTreeMap<String, (usize, bool)>,
) {
    let (structs, fields, order) = rust_layouts! {
        pxl_config {
            struct_size, memory_cache_bytes, max_concurrent_downloads, max_downloads_per_host,
            decode_threads, connect_timeout_ms, timeout_ms, max_body_bytes, max_pixels,
            allowed_schemes, user_agent, stall_timeout_ms, max_redirects, max_retries,
            retry_base_delay_ms, retry_max_delay_ms, ca_file, headers, cancel_storm_limit,
            disk_cache_bytes, ignore_http_freshness, memory_cache_count, disk_cache_dir,
            disk_cache_max_age_s, log, log_user_data, log_level, disk_variant_max_side, codec_modules,
            ca_path, proxy, tls_min_version, request_hook, request_hook_user_data, hook_timeout_ms,
            decode_timeout_ms, isolation, animation_ring_frames, animation_ring_bytes,
        }
        pxl_request {
            struct_size, url, cache_key, width, height, mode, format, priority, flags, headers,
            progress, progress_interval_ms, preview, preview_interval_ms, processors, processor_count,
            placeholder_kind, placeholder,
            placeholder_length,
        }
        pxl_image_info {
            struct_size, width, height, stride, format, pixels, original_width, original_height, frame_count,
            source_frame_count, loop_count, incomplete,
        }
        pxl_metrics {
            struct_size, tier, joined, slot_wait_us, dns_us, connect_us, tls_us, first_byte_us, transfer_us,
            disk_read_us, decode_us, process_us, queue_wait_us, bytes_received, http_status, http_version,
            redirects, connection_reused, decoded_bytes, delivered_bytes, worker_us, isolated,
            other_us, total_us, after_last_byte_us,
        }
        pxl_result { struct_size, status, image, http_status, source, message, preview, incomplete }
        pxl_stats {
            struct_size, requests, memory_hits, disk_hits, network_fetches, revalidated, coalesced,
            cancelled, failed, bytes_downloaded, memory_bytes, memory_count, disk_bytes, bytes_saved,
            variant_hits, variants_stored, variant_bytes_stored, tls_handshakes, tls_resumed,
        }
        pxl_animation_event { struct_size, kind, status, message, image, index, due_ms, frame_count, loop_count }
        pxl_animation_frame { struct_size, index, duration_ms, due_ms, next_due_ms, skipped, ended }
        pxl_animation_stats {
            struct_size, frames_decoded, frames_skipped, frames_shown, ring_bytes, peak_ring_bytes, loops_played,
        }
        pxl_table_config { struct_size, prefetch_rows, keep_rows, visible_priority, prefetch_priority, previews }
        pxl_table_stats { struct_size, started, cancelled, memory_hits, delivered, failed, animation_frames_decoded }
        pxl_codec_header {
            struct_size, flags, width, height, frame_count, loop_count, orientation, has_alpha, icc_size,
            cicp_primaries, cicp_transfer, cicp_matrix,
        }
        pxl_codec_target { struct_size, flags, width, height, pixels, stride, cancel, frame_done, library }
        pxl_codec {
            struct_size, id, version, flags, user_data, sniff, read_header, read_icc, choose_size, decode,
            decode_frames, destroy, open_frames, next_frame, close_frames,
        }
        pxl_processor {
            kind, color, radius_tl, radius_tr, radius_br, radius_bl, border_width, sigma, x, y, width,
            height, degrees, vertical, id,
        }
        pxl_processor_frame {
            struct_size, pixels, width, height, stride, frame_index, frame_count, input, input_width,
            input_height, cancelled, internal,
        }
        pxl_fetcher { struct_size, start, cancel, destroy, user_data, max_concurrent, disk_cache, disk_max_age_s }
        pxl_codec_sniff_rule { kind, offset, length, bytes }
        pxl_codec_manifest_codec { id, version, flags, has_choose_size, rule_count, rules }
        pxl_codec_manifest { magic, struct_size, codec_count, reserved, codecs }
    };
    let constants = rust_constants![
        PXL_VERSION_MAJOR, PXL_VERSION_MINOR, PXL_VERSION_PATCH, PXL_VERSION_NUM,
        PXL_OK, PXL_E_INVALID_ARGUMENT, PXL_E_MALFORMED_URL, PXL_E_SCHEME_NOT_ALLOWED, PXL_E_DNS,
        PXL_E_CONNECT, PXL_E_TLS, PXL_E_TIMEOUT, PXL_E_HTTP, PXL_E_BODY_TOO_LARGE,
        PXL_E_NOT_AN_IMAGE, PXL_E_CORRUPT_IMAGE, PXL_E_TOO_MANY_PIXELS, PXL_E_CANCELLED,
        PXL_E_LOADER_CLOSED, PXL_E_NETWORK, PXL_E_UNSUPPORTED_IMAGE, PXL_E_NO_MEMORY,
        PXL_E_NOT_FOUND, PXL_E_IO, PXL_E_TOO_MANY_REDIRECTS, PXL_E_NOT_CACHED, PXL_E_UNSUPPORTED, PXL_E_DECODER_FAILED,
        PXL_FORMAT_RGBA8, PXL_FORMAT_RGBA8_PREMUL, PXL_FORMAT_BGRA8_PREMUL, PXL_FORMAT_RGB8,
        PXL_FORMAT_GRAY8, PXL_MODE_FIT, PXL_MODE_FILL,
        PXL_PRIORITY_PREFETCH, PXL_PRIORITY_NORMAL, PXL_PRIORITY_VISIBLE,
        PXL_FLAG_IGNORE_ORIENTATION, PXL_FLAG_SKIP_MEMORY_CACHE, PXL_FLAG_RELOAD, PXL_FLAG_CACHE_ONLY,
        PXL_FLAG_ANIMATE, PXL_ANIMATION_MAX_BYTES,
        PXL_FLAG_NO_COLOR_MANAGEMENT,
        PXL_SCHEME_HTTP, PXL_SCHEME_HTTPS, PXL_SCHEME_FILE, PXL_SCHEME_DATA,
        PXL_SOURCE_NONE, PXL_SOURCE_MEMORY, PXL_SOURCE_NETWORK, PXL_SOURCE_DISK, PXL_SOURCE_REVALIDATED,
        PXL_SOURCE_FETCHER, PXL_SOURCE_DATA, PXL_SOURCE_FILE,
        PXL_LOG_ERROR, PXL_LOG_WARNING, PXL_LOG_INFO, PXL_TLS_1_2, PXL_TLS_1_3,
        PXL_ISOLATION_MODULES, PXL_ISOLATION_NONE, PXL_ISOLATION_ALL, PXL_ISOLATION_REQUIRED,
        PXL_CONFIG_SIZE_0_1, PXL_REQUEST_SIZE_0_1, PXL_TABLE_CONFIG_SIZE_0_1, PXL_STATS_SIZE_0_1,
        PXL_TABLE_STATS_SIZE_0_1, PXL_CONFIG_SIZE_0_2, PXL_FETCHER_SIZE_0_5,
        PXL_CODEC_PREMULTIPLIED, PXL_CODEC_PROGRESSIVE, PXL_CODEC_SCALABLE, PXL_CODEC_KEEP_ORIENTATION, PXL_CODEC_PARTIAL,
        PXL_CODEC_SNIFF_BYTES,
        PXL_CODEC_MANIFEST_MAGIC, PXL_CODEC_MANIFEST_CODECS, PXL_CODEC_MANIFEST_RULES,
        PXL_SNIFF_BYTES, PXL_SNIFF_FTYP_BRAND, PXL_SNIFF_XML_ROOT,
        PXL_MAX_PROCESSORS, PXL_MAX_BLUR_SIGMA, PXL_PROCESS_CIRCLE, PXL_PROCESS_ROUND, PXL_PROCESS_BLUR,
        PXL_PROCESS_CROP, PXL_PROCESS_ROTATE, PXL_PROCESS_FLIP, PXL_PROCESS_GRAY, PXL_PROCESS_TINT,
        PXL_PROCESS_CUSTOM,
        PXL_PREVIEW_PLACEHOLDER, PXL_METRICS_SIZE_0_5, PXL_PLACEHOLDER_MAX_SIDE, PXL_PLACEHOLDER_MAX_BYTES,
        PXL_TIER_NONE, PXL_TIER_MEMORY, PXL_TIER_DISK_VARIANT, PXL_TIER_DISK, PXL_TIER_REVALIDATED,
        PXL_TIER_NETWORK, PXL_TIER_FILE, PXL_TIER_DATA, PXL_TIER_FETCHER,
        PXL_PLACEHOLDER_NONE, PXL_PLACEHOLDER_BLURHASH, PXL_PLACEHOLDER_THUMBHASH,
        PXL_ANIMATION_LOADED, PXL_ANIMATION_FRAME_READY, PXL_ANIMATION_ENDED, PXL_ANIMATION_FAILED,
    ];
    let enums = rust_enums![pxl_status, pxl_format, pxl_mode, pxl_source, pxl_processor_kind, pxl_tier,
                            pxl_placeholder_kind, pxl_codec_sniff_kind, pxl_animation_event_kind];
    (structs, fields, order, constants, enums)
}

// ---------------------------------------------------------------------------------
// Parsing both files
// ---------------------------------------------------------------------------------

fn strip_c_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("unterminated comment") + start + 2;
        out.push(' ');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A C type as the Rust declaration must spell it.
fn c_type_to_rust(c: &str) -> String {
    // volatile (pxl_codec_target.cancel) has no Rust spelling: a plain pointer.
    let spaced = c.replace('*', " * ").replace("volatile", " ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let first_star = tokens.iter().position(|t| *t == "*").unwrap_or(tokens.len());
    let base_const = tokens[..first_star].contains(&"const");
    // "volatile" and an elaborated "struct" change nothing a Rust declaration spells.
    let base: Vec<&str> =
        tokens[..first_star].iter().copied().filter(|t| !matches!(*t, "const" | "volatile" | "struct")).collect();
    assert_eq!(base.len(), 1, "unexpected C type '{c}'");
    let mut levels = Vec::new(); // whether each pointer is itself const
    let mut i = first_star;
    while i < tokens.len() {
        assert_eq!(tokens[i], "*", "unexpected C type '{c}'");
        let is_const = tokens.get(i + 1) == Some(&"const");
        levels.push(is_const);
        i += if is_const { 2 } else { 1 };
    }
    let mut rust = match base[0] {
        "void" if levels.is_empty() => return String::new(),
        "void" => "c_void",
        "char" => "c_char",
        "int" => "c_int",
        "int32_t" => "i32",
        "uint32_t" => "u32",
        "int64_t" => "i64",
        "uint64_t" => "u64",
        "uint8_t" => "u8",
        "double" => "f64",
        "size_t" => "usize",
        other => other,
    }
    .to_string();
    for (level, _) in levels.iter().enumerate() {
        let pointee_const = if level == 0 { base_const } else { levels[level - 1] };
        rust = format!("*{}{}", if pointee_const { "const" } else { "mut" }, rust);
    }
    rust
}

/// "const pxl_request *request" -> ("request", "*constpxl_request"); an array
/// "uint8_t bytes[16]" -> ("bytes", "[u8;16]") and "pxl_codec_sniff_rule
/// rules[PXL_CODEC_MANIFEST_RULES]" -> ("rules", "[pxl_codec_sniff_rule;PXL_CODEC_MANIFEST_RULES]"),
/// the length spelt as in the header: a number, or a #define that sys.rs declares as a
/// usize constant of the same name (parse_header checks that the header defines it).
fn c_declaration(decl: &str) -> (String, String) {
    let mut decl = decl.trim();
    let mut lengths = Vec::new(); // outermost first: "T a[2][3]" is [[T; 3]; 2]
    while let Some(open) = decl.strip_suffix(']').and_then(|d| d.rfind('[')) {
        let length = decl[open + 1..decl.len() - 1].trim();
        let is_number = !length.is_empty() && length.chars().all(|c| c.is_ascii_digit());
        let is_name = length.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && length.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        assert!(is_number || is_name, "unexpected C array length in '{decl}'");
        lengths.insert(0, length.to_string());
        decl = decl[..open].trim_end();
    }
    let name_start = decl.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
    let mut ty = c_type_to_rust(&decl[..name_start]);
    for length in lengths.iter().rev() {
        ty = format!("[{ty};{length}]");
    }
    (decl[name_start..].to_string(), ty)
}

/// The array lengths a Rust type names ("[[T;A];3]" -> ["A"]): those that are not numbers.
fn named_array_lengths(rust_type: &str) -> Vec<String> {
    rust_type
        .split(';')
        .skip(1)
        .map(|part| part.trim_end_matches(']').to_string())
        .filter(|length| !length.chars().all(|c| c.is_ascii_digit()))
        .collect()
}

/// The header's macros that are attributes, not values: no Rust constant, nothing for
/// the C report to print. Each must be in the header and expand to __attribute__ (so
/// that a value macro can never hide here); any other #define PXL_ is a constant.
const ATTRIBUTE_MACROS: &[&str] = &[
    // Marks the library's functions exported (or nothing, for a static build): Rust's
    // extern block declares them instead.
    "PXL_API",
    // Marks a module's exported pxl_codec_module_manifest (exported, kept by the linker):
    // a Rust module writes #[no_mangle] and #[used] on its static instead.
    "PXL_MODULE_MANIFEST",
];

fn c_parameters(list: &str) -> Vec<String> {
    let list = list.trim();
    if list == "void" || list.is_empty() {
        return Vec::new();
    }
    list.split(',').map(|p| c_declaration(p).1).collect()
}

fn no_spaces(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

fn rust_parameters(list: &str) -> Vec<String> {
    list.split(',').filter(|p| !p.trim().is_empty()).map(|p| no_spaces(p.split_once(':').unwrap().1)).collect()
}

/// Signatures: name -> (parameter types, return type), all in Rust spelling.
type Signatures = BTreeMap<String, (Vec<String>, String)>;

#[derive(Default, Debug)]
struct Declarations {
    structs: BTreeMap<String, Vec<(String, String)>>, // name -> [(field, type)]
    opaque: BTreeSet<String>,
    enums: BTreeMap<String, Vec<String>>,
    defines: BTreeSet<String>,
    aliases: BTreeMap<String, String>, // typedef name -> Rust type
    callbacks: Signatures,
    functions: Signatures,
}

fn parse_header(text: &str) -> Declarations {
    let mut d = Declarations::default();
    let mut attributes_seen = BTreeSet::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() >= 3 && words[0] == "#define" && words[1].starts_with("PXL_") && !words[1].contains('(') {
            if ATTRIBUTE_MACROS.contains(&words[1]) {
                assert!(words[2].starts_with("__attribute__"), "{} is listed as an attribute macro: {line}", words[1]);
                attributes_seen.insert(words[1]);
            } else {
                d.defines.insert(words[1].to_string());
            }
        }
    }
    let listed: BTreeSet<&str> = ATTRIBUTE_MACROS.iter().copied().collect();
    assert_eq!(attributes_seen, listed, "ATTRIBUTE_MACROS no longer in the header (or not attributes)");
    let code = strip_c_comments(text);
    let code: String = code.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n");
    let code = squash(&code);
    for statement in code.split(';').map(str::trim) {
        let statement = statement.trim_start_matches("extern \"C\" {").trim_start_matches('}').trim();
        if let Some(rest) = statement.strip_prefix("typedef struct ") {
            if let Some((head, body)) = rest.split_once('{') {
                let name = head.trim().to_string();
                d.structs.insert(name, Vec::new());
                // The body continues over the next statements: collected below.
                let _ = body;
            } else {
                let name = rest.split_whitespace().next().unwrap();
                d.opaque.insert(name.to_string());
            }
        } else if let Some(rest) = statement.strip_prefix("typedef enum ") {
            let (head, body) = rest.split_once('{').unwrap();
            let (body, _) = body.split_once('}').unwrap();
            let members = body.split(',').map(|m| m.split('=').next().unwrap().trim().to_string()).collect();
            d.enums.insert(head.trim().to_string(), members);
        } else if let Some(rest) = statement.strip_prefix("typedef ") {
            if let Some((ret, after)) = rest.split_once("(*") {
                let (name, params) = after.split_once(")(").unwrap();
                let params = params.strip_suffix(')').unwrap();
                d.callbacks.insert(name.trim().to_string(), (c_parameters(params), c_type_to_rust(ret)));
            } else {
                let (name, ty) = c_declaration(rest);
                d.aliases.insert(name, ty);
            }
        } else if let Some(rest) = statement.strip_prefix("PXL_API ") {
            let (head, params) = rest.split_once('(').unwrap();
            let params = params.strip_suffix(')').unwrap();
            let (name, ret) = c_declaration(head);
            d.functions.insert(name, (c_parameters(params), ret));
        }
    }
    // Struct bodies: "typedef struct NAME { T a; T b; ... } NAME;"
    let mut rest = code.as_str();
    while let Some(start) = rest.find("typedef struct ") {
        rest = &rest[start + "typedef struct ".len()..];
        let head_end = rest.find(|c| c == '{' || c == ';').unwrap();
        if &rest[head_end..head_end + 1] == ";" {
            continue;
        }
        let name = rest[..head_end].trim().to_string();
        let body_end = rest.find('}').unwrap();
        let fields = rest[head_end + 1..body_end]
            .split(';')
            .filter(|f| !f.trim().is_empty())
            .map(c_declaration)
            .collect();
        d.structs.insert(name, fields);
    }
    for (name, fields) in &d.structs {
        for (field, ty) in fields {
            for length in named_array_lengths(ty) {
                assert!(d.defines.contains(&length), "{name}.{field}: array length {length} is not a header #define");
            }
        }
    }
    d
}

fn parse_rust(text: &str) -> Declarations {
    let mut d = Declarations::default();
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap())
        .filter(|l| !l.trim_start().starts_with("#"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = squash(&code);
    let mut rest = code.as_str();
    while let Some(start) = rest.find("pub struct ") {
        rest = &rest[start + "pub struct ".len()..];
        let (name, after) = rest.split_once('{').unwrap();
        let body = after.split_once('}').unwrap().0;
        let name = name.trim();
        if name.starts_with('$') {
            continue; // the opaque! macro's template
        }
        let fields = body
            .split(',')
            .filter(|f| !f.trim().is_empty())
            .map(|f| {
                let (field, ty) = f.trim().strip_prefix("pub ").unwrap().split_once(':').unwrap();
                (field.trim().to_string(), no_spaces(ty))
            })
            .collect();
        d.structs.insert(name.to_string(), fields);
    }
    for part in code.split("opaque!(").skip(1) {
        let name = part.split(')').next().unwrap();
        if !name.starts_with('$') {
            d.opaque.insert(name.to_string());
        }
    }
    for statement in code.split(';').map(str::trim) {
        // What follows a struct body or the opening of the extern block.
        let statement = statement.rsplit('}').next().unwrap().rsplit('{').next().unwrap().trim();
        if let Some(rest) = statement.strip_prefix("pub const ") {
            d.defines.insert(rest.split(':').next().unwrap().trim().to_string());
        } else if let Some(rest) = statement.strip_prefix("pub type ") {
            let (name, ty) = rest.split_once('=').unwrap();
            let ty = ty.trim();
            if let Some(sig) = ty.strip_prefix("Option<unsafe extern \"C\" fn(") {
                let sig = sig.strip_suffix('>').unwrap();
                let (params, ret) = sig.rsplit_once(')').unwrap();
                let ret = ret.trim().strip_prefix("->").map_or(String::new(), no_spaces);
                d.callbacks.insert(name.trim().to_string(), (rust_parameters(params), ret));
            } else {
                d.aliases.insert(name.trim().to_string(), no_spaces(ty));
            }
        } else if let Some(rest) = statement.strip_prefix("pub fn ") {
            let (name, after) = rest.split_once('(').unwrap();
            let (params, ret) = after.rsplit_once(')').unwrap();
            let ret = ret.trim().strip_prefix("->").map_or(String::new(), no_spaces);
            d.functions.insert(name.trim().to_string(), (rust_parameters(params), ret));
        }
    }
    d
}

// ---------------------------------------------------------------------------------
// The C side, compiled
// ---------------------------------------------------------------------------------

fn c_report(header: &Declarations) -> String {
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"pixload.h\"\nint main(void) {\n");
    for (name, fields) in &header.structs {
        c += &format!("  printf(\"struct {name} %zu %zu\\n\", sizeof({name}), _Alignof({name}));\n");
        for (field, _) in fields {
            c += &format!(
                "  printf(\"field {name}.{field} %zu %zu\\n\", offsetof({name}, {field}), sizeof((({name} *)0)->{field}));\n"
            );
        }
    }
    for name in header.enums.keys() {
        c += &format!("  printf(\"enum {name} %zu %d\\n\", sizeof({name}), ({name})-1 < 0);\n");
    }
    let constants = header.enums.values().flatten().chain(header.defines.iter().filter(|n| *n != "PXL_VERSION_STRING"));
    for name in constants {
        c += &format!("  printf(\"const {name} %lld\\n\", (long long)({name}));\n");
    }
    c += "  printf(\"string PXL_VERSION_STRING %s\\n\", PXL_VERSION_STRING);\n  return 0;\n}\n";
    // One directory per call: the tests run in parallel.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("pxl-rust-header.{}.{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("layout.c"), c).unwrap();
    let header_dir = header_path().parent().unwrap().to_path_buf();
    let compiled = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(&header_dir)
        .arg(dir.join("layout.c"))
        .arg("-o")
        .arg(dir.join("layout"))
        .output()
        .expect("cannot run gcc");
    assert!(compiled.status.success(), "gcc: {}", String::from_utf8_lossy(&compiled.stderr));
    let output = Command::new(dir.join("layout")).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

fn header_and_rust() -> (Declarations, Declarations) {
    let header = parse_header(&std::fs::read_to_string(header_path()).unwrap());
    let rust = parse_rust(include_str!("../src/sys.rs"));
    (header, rust)
}

#[test]
fn every_function_has_the_header_signature() {
    let (header, rust) = header_and_rust();
    assert!(header.functions.len() >= 45, "parsed only {} functions from the header", header.functions.len());
    assert_eq!(header.functions.keys().collect::<Vec<_>>(), rust.functions.keys().collect::<Vec<_>>());
    for (name, c) in &header.functions {
        assert_eq!(Some(c), rust.functions.get(name), "{name}: header (left) vs sys.rs (right)");
    }
    assert_eq!(header.callbacks, rust.callbacks, "callback typedefs: header (left) vs sys.rs (right)");
    for (name, c) in &header.aliases {
        assert_eq!(Some(c), rust.aliases.get(name), "typedef {name}");
    }
    assert_eq!(header.opaque, rust.opaque, "opaque handles");
}

#[test]
fn every_struct_has_the_header_fields_layout_and_size() {
    let (header, rust) = header_and_rust();
    let (sizes, offsets, order, _, _) = rust_side();
    assert_eq!(header.structs.keys().collect::<Vec<_>>(), rust.structs.keys().collect::<Vec<_>>());
    assert_eq!(header.structs.keys().collect::<Vec<_>>(), sizes.keys().collect::<Vec<_>>(), "the test's list");
    for (name, fields) in &header.structs {
        assert_eq!(Some(fields), rust.structs.get(name), "{name}: fields and types, header (left) vs sys.rs (right)");
        let names: Vec<String> = fields.iter().map(|(f, _)| f.clone()).collect();
        assert_eq!(Some(&names), order.get(name), "{name}: the test's field list");
    }
    let report = c_report(&header);
    let mut checked = 0;
    for line in report.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "struct" => {
                let c = (w[2].parse().unwrap(), w[3].parse().unwrap());
                assert_eq!(Some(&c), sizes.get(w[1]), "{}: (size, align) in C (left) and Rust (right)", w[1]);
                checked += 1;
            }
            "field" => {
                let c = (w[2].parse().unwrap(), w[3].parse().unwrap());
                assert_eq!(Some(&c), offsets.get(w[1]), "{}: (offset, size) in C (left) and Rust (right)", w[1]);
                checked += 1;
            }
            _ => {}
        }
    }
    assert_eq!(checked, sizes.len() + offsets.len(), "every struct and field was compared:\n{report}");
}

#[test]
fn every_constant_and_enum_has_the_header_value() {
    let (header, rust) = header_and_rust();
    let (_, _, _, constants, enums) = rust_side();
    let mut names: BTreeSet<String> = header.enums.values().flatten().cloned().collect();
    names.extend(header.defines.iter().cloned());
    assert_eq!(names, rust.defines, "constants: header (left) vs sys.rs (right)");
    let mut listed: BTreeSet<String> = constants.keys().cloned().collect();
    listed.insert("PXL_VERSION_STRING".into());
    assert_eq!(names, listed, "the test's constant list");
    assert_eq!(header.enums.keys().collect::<BTreeSet<_>>(), enums.keys().collect::<BTreeSet<_>>());
    for name in header.enums.keys() {
        assert!(rust.aliases.contains_key(name), "enum {name} has a Rust type");
    }

    let report = c_report(&header);
    let mut checked = 0;
    for line in report.lines() {
        let w: Vec<&str> = line.splitn(3, ' ').collect();
        match w[0] {
            "const" => {
                assert_eq!(Some(&w[2].parse::<i64>().unwrap()), constants.get(w[1]), "{}", w[1]);
                checked += 1;
            }
            "enum" => {
                let mut sw = w[2].split(' ');
                let c = (sw.next().unwrap().parse().unwrap(), sw.next().unwrap() == "1");
                assert_eq!(Some(&c), enums.get(w[1]), "enum {}: (size, signed) in C and Rust", w[1]);
                checked += 1;
            }
            "string" => {
                assert_eq!(w[2], PXL_VERSION_STRING);
                checked += 1;
            }
            _ => {}
        }
    }
    assert_eq!(checked, constants.len() + enums.len() + 1, "every constant was compared:\n{report}");
}
