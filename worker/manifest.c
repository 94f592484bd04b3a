/*
 * worker/manifest.c: a codec module's manifest (pixload.h, "Codec modules":
 * pxl_codec_module_manifest) read from the module's file without loading it, and its sniff
 * rules. The library's side (compiled into libpixload through Sources/CWorker), so that
 * under isolation the host never maps the module nor its libraries (libheif, libjxl,
 * librsvg): the file's ELF dynamic symbol table names the manifest's address, a PT_LOAD
 * segment says where those bytes are in the file, and the bytes are checked like a
 * stranger's (magic, size, counts, NUL-terminated strings) before anything uses them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pixload.h"
#include "manifest.h"
#include "../codecs/iso_bmff.h"

static int read_at(int fd, void *buf, size_t n, uint64_t at) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(at + done));
    if (r <= 0) return -1;
    done += (size_t)r;
  }
  return 0;
}

static int valid_manifest(const pxl_codec_manifest *m) {
  if (m->magic != PXL_CODEC_MANIFEST_MAGIC || m->struct_size < sizeof *m) return 0;
  if (m->codec_count < 1 || m->codec_count > PXL_CODEC_MANIFEST_CODECS) return 0;
  for (uint32_t i = 0; i < m->codec_count; i++) {
    const pxl_codec_manifest_codec *c = &m->codecs[i];
    if (!memchr(c->id, 0, sizeof c->id) || !c->id[0] || !memchr(c->version, 0, sizeof c->version)) return 0;
    if (c->rule_count < 1 || c->rule_count > PXL_CODEC_MANIFEST_RULES) return 0;
    for (uint32_t r = 0; r < c->rule_count; r++) {
      const pxl_codec_sniff_rule *rule = &c->rules[r];
      if (rule->kind < PXL_SNIFF_BYTES || rule->kind > PXL_SNIFF_XML_ROOT) return 0;
      if (rule->length < 1 || rule->length > sizeof rule->bytes) return 0;
      if (rule->kind == PXL_SNIFF_FTYP_BRAND && rule->length != 4) return 0;
      if (rule->kind == PXL_SNIFF_BYTES && rule->offset + rule->length > PXL_CODEC_SNIFF_BYTES) return 0;
    }
  }
  return 1;
}

int pxl_manifest_read(const char *path, pxl_codec_manifest *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int found = 0;
  Elf64_Shdr *sections = NULL;
  Elf64_Phdr *segments = NULL;
  char *names = NULL;
  Elf64_Ehdr eh;
  struct stat st;
  if (fstat(fd, &st) != 0 || read_at(fd, &eh, sizeof eh, 0) != 0) goto done;
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 || eh.e_phnum > 4096)
    goto done;
  sections = calloc(eh.e_shnum, sizeof *sections);
  segments = calloc(eh.e_phnum + 1, sizeof *segments);
  if (!sections || !segments || read_at(fd, sections, eh.e_shnum * sizeof *sections, eh.e_shoff) != 0 ||
      read_at(fd, segments, eh.e_phnum * sizeof *segments, eh.e_phoff) != 0)
    goto done;
  for (unsigned s = 0; s < eh.e_shnum && !found; s++) {
    const Elf64_Shdr *sym = &sections[s];
    if (sym->sh_type != SHT_DYNSYM || sym->sh_entsize != sizeof(Elf64_Sym) || sym->sh_link >= eh.e_shnum) continue;
    const Elf64_Shdr *str = &sections[sym->sh_link];
    if (str->sh_size == 0 || str->sh_size > (uint64_t)st.st_size || sym->sh_size > (uint64_t)st.st_size) continue;
    free(names);
    names = malloc(str->sh_size + 1);
    if (!names || read_at(fd, names, str->sh_size, str->sh_offset) != 0) goto done;
    names[str->sh_size] = 0;
    for (uint64_t at = 0; at + sizeof(Elf64_Sym) <= sym->sh_size && !found; at += sizeof(Elf64_Sym)) {
      Elf64_Sym e;
      if (read_at(fd, &e, sizeof e, sym->sh_offset + at) != 0) goto done;
      if (e.st_name >= str->sh_size || e.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(e.st_info) != STT_OBJECT ||
          strcmp(names + e.st_name, "pxl_codec_module_manifest") != 0 || e.st_size < sizeof *out)
        continue;
      for (unsigned p = 0; p < eh.e_phnum; p++) {
        const Elf64_Phdr *ph = &segments[p];
        if (ph->p_type != PT_LOAD || e.st_value < ph->p_vaddr || e.st_value - ph->p_vaddr > ph->p_filesz ||
            ph->p_filesz - (e.st_value - ph->p_vaddr) < sizeof *out)
          continue;
        if (read_at(fd, out, sizeof *out, ph->p_offset + (e.st_value - ph->p_vaddr)) == 0 && valid_manifest(out))
          found = 1;
        break;
      }
      if (!found) goto done;  /* the symbol, but not a manifest we can read: load the module */
    }
  }
done:
  free(names);
  free(sections);
  free(segments);
  close(fd);
  return found;
}

static int starts(const uint8_t *p, const uint8_t *end, const char *s, size_t n) {
  return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

static const uint8_t *skip_past(const uint8_t *p, const uint8_t *end, const char *s) {
  size_t n = strlen(s);
  for (; (size_t)(end - p) >= n; p++)
    if (memcmp(p, s, n) == 0) return p + n;
  return NULL;
}

/* codecs/svg.c's find_root, for any root element name. */
static int xml_root(const uint8_t *data, size_t size, const uint8_t *name, size_t length) {
  const uint8_t *p = data, *end = data + (size < PXL_CODEC_SNIFF_BYTES ? size : PXL_CODEC_SNIFF_BYTES);
  if (starts(p, end, "\xef\xbb\xbf", 3)) p += 3;
  while (p && p < end) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') { p++; continue; }
    if (starts(p, end, "<?xml", 5)) { p = skip_past(p, end, "?>"); continue; }
    if (starts(p, end, "<!--", 4)) { p = skip_past(p, end, "-->"); continue; }
    if (starts(p, end, "<!DOCTYPE", 9)) {
      const uint8_t *q = p;
      while (q < end && *q != '[' && *q != '>') q++;
      if (q < end && *q == '[') { p = skip_past(q, end, "]"); if (!p) return 0; }
      p = skip_past(p, end, ">");
      continue;
    }
    if ((size_t)(end - p) <= length + 1 || *p != '<' || memcmp(p + 1, name, length) != 0) return 0;
    uint8_t next = p[1 + length];
    return next == ' ' || next == '\t' || next == '\n' || next == '\r' || next == '>' || next == '/';
  }
  return 0;
}

int pxl_manifest_sniff(const pxl_codec_manifest_codec *codec, const uint8_t *data, size_t size) {
  for (uint32_t r = 0; r < codec->rule_count && r < PXL_CODEC_MANIFEST_RULES; r++) {
    const pxl_codec_sniff_rule *rule = &codec->rules[r];
    switch (rule->kind) {
    case PXL_SNIFF_BYTES:
      if ((size_t)rule->offset + rule->length <= size && memcmp(data + rule->offset, rule->bytes, rule->length) == 0)
        return 1;
      break;
    case PXL_SNIFF_FTYP_BRAND:
      if (pxl_ftyp_has_brand(data, size, rule->bytes)) return 1;
      break;
    case PXL_SNIFF_XML_ROOT:
      if (xml_root(data, size, rule->bytes, rule->length)) return 1;
      break;
    default:
      break;
    }
  }
  return 0;
}
