/* Kernel and user symbolization for the sampled stacks (see symbolize.h). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize.h"

/* ---- small helpers --------------------------------------------------------------------- */

struct strbuf {
	char *p;
	size_t len, cap;
};

/* Appends s (and its NUL) to b; returns its offset, or (size_t)-1 on ENOMEM. */
static size_t strbuf_add(struct strbuf *b, const char *s)
{
	size_t n = strlen(s) + 1, off = b->len;

	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return (size_t)-1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + off, s, n);
	b->len += n;
	return off;
}

static char *read_whole_file(const char *path, size_t *lenp)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap), *p;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0 || !buf) {
		int e = errno;

		free(buf);
		if (fd >= 0)
			close(fd);
		errno = e ? e : ENOMEM;
		return NULL;
	}
	for (;;) {
		if (cap - len < 4096) {
			p = realloc(buf, cap * 2);
			if (!p) {
				free(buf);
				close(fd);
				errno = ENOMEM;
				return NULL;
			}
			buf = p;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			free(buf);
			close(fd);
			errno = e;
			return NULL;
		}
		if (n == 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = 0;
	if (lenp)
		*lenp = len;
	return buf;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* ---- kernel ---------------------------------------------------------------------------- */

struct ksym {
	uint64_t addr;
	size_t name; /* offset in names */
};

static size_t proc_maps_size_at(const struct proc_maps *m, uint64_t start);

#define KSYM_MAX_DISTANCE (1u << 20) /* farther than this past a symbol: not that symbol */

/* ---- ELF files ------------------------------------------------------------------------- */

struct esym {
	uint64_t addr, size;
	size_t name;
	int rank; /* lower is better: GLOBAL 0, WEAK 1, LOCAL 2; +3 from .dynsym */
};

struct eseg {
	uint64_t off, filesz, vaddr;
	int exec;
};

struct elf_file {
	struct elf_file *next;
	char *path;
	unsigned long ino;
	int ok;           /* an ELF file we could read (segments known) */
	int fd;           /* for reading code bytes; -1 for the vDSO */
	char *image;      /* the vDSO's bytes */
	size_t image_len;
	struct eseg *segs;
	size_t nsegs;
	struct esym *syms;
	size_t nsyms;
	struct strbuf names;
	struct eseg *xsecs; /* executable sections: vaddr, filesz = size */
	size_t nxsecs;
};

struct symbolizer {
	struct ksym *ksyms;
	size_t nksyms;
	struct strbuf knames;
	int kloaded;
	struct elf_file *files;
	struct elf_file *vdso;
	int vdso_tried;
};

struct symbolizer *symbolizer_new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	return calloc(1, sizeof(struct symbolizer));
}

static void elf_file_free(struct elf_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	free(f->image);
	free(f->path);
	free(f->segs);
	free(f->syms);
	free(f->names.p);
	free(f->xsecs);
	free(f);
}

void symbolizer_free(struct symbolizer *s)
{
	struct elf_file *f, *n;

	if (!s)
		return;
	free(s->ksyms);
	free(s->knames.p);
	for (f = s->files; f; f = n) {
		n = f->next;
		elf_file_free(f);
	}
	elf_file_free(s->vdso);
	free(s);
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int symbolizer_load_kallsyms(struct symbolizer *s)
{
	struct ksym *v = NULL;
	struct strbuf names = { 0 };
	size_t n = 0, cap = 0, len;
	char *text = read_whole_file("/proc/kallsyms", &len), *line, *next;
	int nonzero = 0;

	s->kloaded = 1;
	if (!text)
		return -1;
	for (line = text; line && *line; line = next) {
		char *type, *name, *end;
		unsigned long long addr;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		addr = strtoull(line, &end, 16);
		if (end == line || *end != ' ')
			continue;
		type = end + 1;
		if (!strchr("tTwW", type[0]) || type[1] != ' ')
			continue;
		name = type + 2;
		end = strpbrk(name, "\t ");
		if (end)
			*end = 0; /* drop "\t[module]" */
		if (n == cap) {
			struct ksym *nv;

			cap = cap ? cap * 2 : 65536;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto oom;
			v = nv;
		}
		v[n].addr = addr;
		v[n].name = strbuf_add(&names, name);
		if (v[n].name == (size_t)-1)
			goto oom;
		nonzero |= addr != 0;
		n++;
	}
	free(text);
	if (!nonzero) { /* kptr_restrict: every address reads 0 */
		free(v);
		free(names.p);
		errno = EPERM;
		return -1;
	}
	qsort(v, n, sizeof(*v), ksym_cmp);
	free(s->ksyms);
	free(s->knames.p);
	s->ksyms = v;
	s->nksyms = n;
	s->knames = names;
	return 0;
oom:
	free(text);
	free(v);
	free(names.p);
	errno = ENOMEM;
	return -1;
}

const char *symbolize_kernel(struct symbolizer *s, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!s->kloaded)
		symbolizer_load_kallsyms(s);
	hi = s->nksyms;
	/* first symbol above addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->ksyms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	if (addr - s->ksyms[lo - 1].addr > KSYM_MAX_DISTANCE)
		return NULL;
	return s->knames.p + s->ksyms[lo - 1].name;
}

/* ---- ELF symbol tables ----------------------------------------------------------------- */

/* By address; at one address the best rank first, then a name without a symbol version
 * ("clock_nanosleep" before "clock_nanosleep@GLIBC_2.2.5"), then the largest size. */
static int esym_cmp(const void *a, const void *b, void *names)
{
	const struct esym *x = a, *y = b;
	int xv, yv;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	xv = strchr((const char *)names + x->name, '@') != NULL;
	yv = strchr((const char *)names + y->name, '@') != NULL;
	if (xv != yv)
		return xv - yv;
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return 0;
}

static int push_sym(struct elf_file *f, uint64_t addr, uint64_t size, int rank, const char *name)
{
	struct esym *e;

	if (f->nsyms % 1024 == 0) {
		struct esym *nv = realloc(f->syms, (f->nsyms + 1024) * sizeof(*nv));

		if (!nv)
			return -1;
		f->syms = nv;
	}
	e = &f->syms[f->nsyms];
	e->addr = addr;
	e->size = size;
	e->rank = rank;
	e->name = strbuf_add(&f->names, name);
	if (e->name == (size_t)-1)
		return -1;
	f->nsyms++;
	return 0;
}

static int add_symtab(struct elf_file *f, Elf *elf, Elf_Scn *scn, int rank_base)
{
	GElf_Shdr sh;
	Elf_Data *data;
	size_t i, count;

	if (!gelf_getshdr(scn, &sh) || sh.sh_entsize == 0)
		return 0;
	data = elf_getdata(scn, NULL);
	if (!data)
		return 0;
	count = sh.sh_size / sh.sh_entsize;
	for (i = 0; i < count; i++) {
		GElf_Sym sym;
		const char *name;
		int type, bind, rank;

		if (!gelf_getsym(data, i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		bind = GELF_ST_BIND(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
		if (push_sym(f, sym.st_value, sym.st_size, rank + rank_base, name))
			return -1;
	}
	return 0;
}

/* GOT slot address -> dynamic symbol name, from the JUMP_SLOT and GLOB_DAT relocations. */
struct got_name {
	uint64_t slot;
	const char *name;
};

static int got_cmp(const void *a, const void *b)
{
	const struct got_name *x = a, *y = b;

	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* The GOT slots the dynamic relocations fill with a named symbol (JUMP_SLOT, GLOB_DAT), in a
 * growing array; 0, or -1 if out of memory. */
static int collect_got_names(Elf *elf, struct got_name **got, size_t *ngot)
{
	size_t cap = 0;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh, lsh;
		Elf_Scn *lscn;
		Elf_Data *data, *syms;
		size_t i, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		lscn = elf_getscn(elf, sh.sh_link);
		if (!lscn || !gelf_getshdr(lscn, &lsh) || lsh.sh_type != SHT_DYNSYM)
			continue;
		data = elf_getdata(scn, NULL);
		syms = elf_getdata(lscn, NULL);
		if (!data || !syms)
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (i = 0; i < n; i++) {
			GElf_Rela r;
			GElf_Sym sym;
			const char *name;
			unsigned type;

			if (!gelf_getrela(data, i, &r))
				break;
			type = GELF_R_TYPE(r.r_info);
			if (type != 7 /* R_X86_64_JUMP_SLOT */ && type != 6 /* R_X86_64_GLOB_DAT */)
				continue;
			if (!gelf_getsym(syms, GELF_R_SYM(r.r_info), &sym))
				continue;
			name = elf_strptr(elf, lsh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (*ngot == cap) {
				struct got_name *ng;

				cap = cap ? cap * 2 : 256;
				ng = realloc(*got, cap * sizeof(*ng));
				if (!ng)
					return -1;
				*got = ng;
			}
			(*got)[*ngot].slot = r.r_offset;
			(*got)[*ngot].name = name;
			(*ngot)++;
		}
	}
	return 0;
}

/* Each stub of one PLT section (sh, data) whose `jmp *disp32(%rip)` goes through a named GOT
 * slot (got sorted by slot) becomes the symbol "name@plt". */
static void name_plt_stubs(struct elf_file *f, const GElf_Shdr *sh, const Elf_Data *data,
			   const struct got_name *got, size_t ngot)
{
	uint64_t ent = sh->sh_entsize ? sh->sh_entsize : 16, e;

	for (e = 0; e + ent <= sh->sh_size; e += ent) {
		const unsigned char *c = (const unsigned char *)data->d_buf + e;
		uint64_t k;

		for (k = 0; k + 6 <= ent; k++) {
			int32_t disp;
			struct got_name want;
			const struct got_name *hit;
			char name[512];

			if (c[k] != 0xff || c[k + 1] != 0x25)
				continue;
			memcpy(&disp, c + k + 2, 4);
			want.slot = sh->sh_addr + e + k + 6 + (int64_t)disp;
			hit = bsearch(&want, got, ngot, sizeof(*got), got_cmp);
			if (hit) {
				snprintf(name, sizeof(name), "%s@plt", hit->name);
				push_sym(f, sh->sh_addr + e, ent, 5, name);
			}
			break;
		}
	}
}

/* x86-64 PLT stubs have no symbols: name each "sym@plt" after the GOT slot that its
 * `jmp *disp32(%rip)` goes through. */
static void add_plt_symbols(struct elf_file *f, Elf *elf)
{
	struct got_name *got = NULL;
	size_t ngot = 0, shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 || elf_getshdrstrndx(elf, &shstrndx))
		return;
	if (collect_got_names(elf, &got, &ngot) || !ngot)
		goto out;
	qsort(got, ngot, sizeof(*got), got_cmp);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		const char *sname;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!sname || (strcmp(sname, ".plt") && strcmp(sname, ".plt.sec") &&
			       strcmp(sname, ".plt.got")))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || data->d_size < sh.sh_size)
			continue;
		name_plt_stubs(f, &sh, data, got, ngot);
	}
out:
	free(got);
}

/* Executable sections, which bound the reach of zero-size symbols. */
static void load_exec_sections(struct elf_file *f, Elf *elf)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		struct eseg *nv;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size)
			continue;
		nv = realloc(f->xsecs, (f->nxsecs + 1) * sizeof(*nv));
		if (!nv)
			return;
		f->xsecs = nv;
		f->xsecs[f->nxsecs].vaddr = sh.sh_addr;
		f->xsecs[f->nxsecs].filesz = sh.sh_size;
		f->nxsecs++;
	}
}

/* 1 when a and b lie in one executable section (or sections are unknown). */
static int same_exec_section(const struct elf_file *f, uint64_t a, uint64_t b)
{
	size_t i;

	if (!f->nxsecs)
		return 1;
	for (i = 0; i < f->nxsecs; i++) {
		uint64_t lo = f->xsecs[i].vaddr, hi = lo + f->xsecs[i].filesz;

		if (a >= lo && a < hi)
			return b >= lo && b < hi;
	}
	return 0;
}

/* Adds the .symtab (and, unless symtab_only, .dynsym) of elf. Returns 1 if it had a
 * .symtab. */
static int add_symbols(struct elf_file *f, Elf *elf, int symtab_only)
{
	Elf_Scn *scn = NULL;
	int have_symtab = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB) {
			add_symtab(f, elf, scn, 0);
			have_symtab = 1;
		} else if (sh.sh_type == SHT_DYNSYM && !symtab_only) {
			add_symtab(f, elf, scn, 3);
		}
	}
	return have_symtab;
}

static Elf_Scn *find_section(Elf *elf, const char *want, GElf_Shdr *shp)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, shp))
			continue;
		name = elf_strptr(elf, shstrndx, shp->sh_name);
		if (name && !strcmp(name, want))
			return scn;
	}
	return NULL;
}

/* Build id as lowercase hex into out (>= 2*20+1 bytes... up to 64 bytes of id). */
static int build_id_hex(Elf *elf, char *out, size_t outlen)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t off = 0, noff, doff;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		while ((off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			const unsigned char *d = (const unsigned char *)data->d_buf + doff;
			size_t i;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)data->d_buf + noff, "GNU", 4))
				continue;
			if (nh.n_descsz < 2 || nh.n_descsz * 2 + 1 > outlen)
				return -1;
			for (i = 0; i < nh.n_descsz; i++)
				sprintf(out + 2 * i, "%02x", d[i]);
			return 0;
		}
	}
	return -1;
}

/* Adds the .symtab of the separate debug file of elf (at path), if one is installed. */
static void add_debug_file_symbols(struct elf_file *f, Elf *elf, const char *path)
{
	char cand[4][4096];
	int ncand = 0, i;
	char id[130];
	GElf_Shdr sh;
	Elf_Scn *scn;

	if (build_id_hex(elf, id, sizeof(id)) == 0)
		snprintf(cand[ncand++], sizeof(cand[0]), "/usr/lib/debug/.build-id/%.2s/%s.debug",
			 id, id + 2);
	scn = find_section(elf, ".gnu_debuglink", &sh);
	if (scn) {
		Elf_Data *data = elf_getdata(scn, NULL);

		if (data && data->d_size > 1 && memchr(data->d_buf, 0, data->d_size)) {
			const char *link = data->d_buf;
			char dir[4096];
			char *slash;

			snprintf(dir, sizeof(dir), "%s", path);
			slash = strrchr(dir, '/');
			if (slash)
				*slash = 0;
			else
				strcpy(dir, ".");
			snprintf(cand[ncand++], sizeof(cand[0]), "/usr/lib/debug%s/%s", dir, link);
			snprintf(cand[ncand++], sizeof(cand[0]), "%s/.debug/%s", dir, link);
			if (strcmp(link, base_name(path)))
				snprintf(cand[ncand++], sizeof(cand[0]), "%s/%s", dir, link);
		}
	}
	for (i = 0; i < ncand; i++) {
		int fd = open(cand[i], O_RDONLY | O_CLOEXEC);
		Elf *d;
		int got;

		if (fd < 0)
			continue;
		d = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		got = d && elf_kind(d) == ELF_K_ELF ? add_symbols(f, d, 1) : 0;
		if (d)
			elf_end(d);
		close(fd);
		if (got)
			return;
	}
}

static void finish_symbols(struct elf_file *f)
{
	size_t i, j;

	if (!f->nsyms)
		return;
	qsort_r(f->syms, f->nsyms, sizeof(*f->syms), esym_cmp, f->names.p);
	/* one entry per address: the best name, the largest size */
	for (i = 1, j = 0; i < f->nsyms; i++) {
		if (f->syms[i].addr == f->syms[j].addr) {
			if (f->syms[i].size > f->syms[j].size)
				f->syms[j].size = f->syms[i].size;
			continue;
		}
		f->syms[++j] = f->syms[i];
	}
	f->nsyms = j + 1;
}

static int load_segments(struct elf_file *f, Elf *elf)
{
	size_t n, i;

	if (elf_getphdrnum(elf, &n))
		return -1;
	f->segs = calloc(n ? n : 1, sizeof(*f->segs));
	if (!f->segs)
		return -1;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		f->segs[f->nsegs].off = ph.p_offset;
		f->segs[f->nsegs].filesz = ph.p_filesz;
		f->segs[f->nsegs].vaddr = ph.p_vaddr;
		f->segs[f->nsegs].exec = !!(ph.p_flags & PF_X);
		f->nsegs++;
	}
	return f->nsegs ? 0 : -1;
}

static void load_elf(struct elf_file *f, Elf *elf, const char *path)
{
	if (elf_kind(elf) != ELF_K_ELF || load_segments(f, elf))
		return;
	f->ok = 1;
	if (!add_symbols(f, elf, 0) && path)
		add_debug_file_symbols(f, elf, path);
	add_plt_symbols(f, elf);
	load_exec_sections(f, elf);
	finish_symbols(f);
}

static struct elf_file *elf_file_open(const char *path, unsigned long ino)
{
	struct elf_file *f = calloc(1, sizeof(*f));
	struct stat st;
	Elf *elf;

	if (!f)
		return NULL;
	f->fd = -1;
	f->ino = ino;
	f->path = strdup(path);
	if (!f->path) {
		free(f);
		return NULL;
	}
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return f;
	/* the file at that path now is not the one that was mapped: know nothing */
	if (fstat(f->fd, &st) || (ino && st.st_ino != ino)) {
		close(f->fd);
		f->fd = -1;
		return f;
	}
	elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	if (elf) {
		load_elf(f, elf, path);
		elf_end(elf);
	}
	return f;
}

static struct elf_file *get_elf(struct symbolizer *s, const char *path, unsigned long ino)
{
	struct elf_file *f;

	for (f = s->files; f; f = f->next)
		if (f->ino == ino && !strcmp(f->path, path))
			return f;
	f = elf_file_open(path, ino);
	if (f) {
		f->next = s->files;
		s->files = f;
	}
	return f;
}

/* The vDSO is the same image in every process (of this architecture): read ours. */
static struct elf_file *get_vdso(struct symbolizer *s)
{
	unsigned long base;
	struct proc_maps *m = NULL;
	struct elf_file *f;
	Elf *elf;

	if (s->vdso_tried)
		return s->vdso;
	s->vdso_tried = 1;
	base = getauxval(AT_SYSINFO_EHDR);
	if (!base)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->fd = -1;
	f->path = strdup("[vdso]");
	m = proc_maps_read(getpid());
	if (m) {
		/* the [vdso] mapping that starts at base gives the image size */
		size_t len = proc_maps_size_at(m, base);

		if (len) {
			f->image = malloc(len);
			if (f->image) {
				memcpy(f->image, (const void *)base, len);
				f->image_len = len;
			}
		}
		proc_maps_free(m);
	}
	if (f->image) {
		elf = elf_memory(f->image, f->image_len);
		if (elf) {
			load_elf(f, elf, NULL);
			elf_end(elf);
		}
	}
	s->vdso = f;
	return f;
}

static long find_esym(const struct elf_file *f, uint64_t vaddr)
{
	size_t lo = 0, hi = f->nsyms;
	long i, stop;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	i = (long)lo - 1;
	/* a zero-size symbol (assembly) reaches up to the next symbol, in its section */
	if (f->syms[i].size == 0)
		return same_exec_section(f, f->syms[i].addr, vaddr) ? i : -1;
	/* the nearest symbol may be a small one that ends before vaddr while an earlier,
	 * larger one encloses it */
	for (stop = i - 8 < 0 ? 0 : i - 8; i >= stop; i--)
		if (vaddr - f->syms[i].addr < f->syms[i].size)
			return i;
	return -1;
}

static int file_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr, int *exec)
{
	size_t i;

	for (i = 0; i < f->nsegs; i++) {
		const struct eseg *g = &f->segs[i];

		if (off >= g->off && off < g->off + g->filesz) {
			*vaddr = off - g->off + g->vaddr;
			if (exec)
				*exec = g->exec;
			return 0;
		}
	}
	return -1;
}

const char *symbolize_elf_vaddr(struct symbolizer *s, const char *path, uint64_t vaddr)
{
	struct elf_file *f = get_elf(s, path, 0);
	long i;

	if (!f || !f->ok)
		return NULL;
	i = find_esym(f, vaddr);
	return i < 0 ? NULL : f->names.p + f->syms[i].name;
}

/* ---- /proc/PID/maps -------------------------------------------------------------------- */

struct map_entry {
	uint64_t start, end, off;
	unsigned long ino;
	int exec;
	char *path; /* "" for anonymous */
};

struct proc_maps {
	struct map_entry *v;
	size_t n;
};

void proc_maps_free(struct proc_maps *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	free(m);
}

struct proc_maps *proc_maps_parse(const char *text)
{
	struct proc_maps *m = calloc(1, sizeof(*m));
	size_t cap = 0;
	const char *line = text, *eol;

	if (!m)
		return NULL;
	for (; line && *line; line = eol ? eol + 1 : NULL) {
		unsigned long long start, end, off;
		unsigned long ino;
		unsigned int maj, min;
		char perms[8];
		int pos = 0;
		const char *p;
		size_t plen;
		struct map_entry *e;

		eol = strchr(line, '\n');
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %lu %n", &start, &end, perms, &off, &maj,
			   &min, &ino, &pos) < 7 ||
		    pos == 0)
			continue;
		if (m->n == cap) {
			struct map_entry *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(m->v, cap * sizeof(*nv));
			if (!nv)
				goto oom;
			m->v = nv;
		}
		p = line + pos;
		plen = eol ? (size_t)(eol - p) : strlen(p);
		while (plen && (p[plen - 1] == ' ' || p[plen - 1] == '\r'))
			plen--;
		e = &m->v[m->n];
		e->start = start;
		e->end = end;
		e->off = off;
		e->ino = ino;
		e->exec = perms[2] == 'x';
		e->path = strndup(p, plen);
		if (!e->path)
			goto oom;
		m->n++;
	}
	return m;
oom:
	proc_maps_free(m);
	errno = ENOMEM;
	return NULL;
}

struct proc_maps *proc_maps_read(pid_t pid)
{
	char path[64], *text;
	struct proc_maps *m;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	text = read_whole_file(path, NULL);
	if (!text)
		return NULL;
	if (!*text) { /* a zombie: no mm any more */
		free(text);
		errno = ESRCH;
		return NULL;
	}
	m = proc_maps_parse(text);
	free(text);
	return m;
}

int proc_maps_equal(const struct proc_maps *a, const struct proc_maps *b)
{
	size_t i;

	if (!a || !b || a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++) {
		const struct map_entry *x = &a->v[i], *y = &b->v[i];

		if (x->start != y->start || x->end != y->end || x->off != y->off ||
		    x->ino != y->ino || x->exec != y->exec || strcmp(x->path, y->path))
			return 0;
	}
	return 1;
}

static size_t proc_maps_size_at(const struct proc_maps *m, uint64_t start)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->v[i].start == start)
			return m->v[i].end - m->v[i].start;
	return 0;
}

static const struct map_entry *find_map(const struct proc_maps *m, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!m)
		return NULL;
	hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= m->v[lo - 1].end)
		return NULL;
	return &m->v[lo - 1];
}

/* The module name of a mapping: the file's base name without " (deleted)". */
static void module_name(const char *path, char *buf, size_t len)
{
	const char *b = base_name(path);
	size_t n = strlen(b);
	const char *del = " (deleted)";

	if (n > strlen(del) && !strcmp(b + n - strlen(del), del))
		n -= strlen(del);
	snprintf(buf, len, "[%.*s]", (int)n, b);
}

/* The ELF file behind a mapping (NULL for anonymous and special mappings). */
static struct elf_file *map_file(struct symbolizer *s, const struct map_entry *e)
{
	char path[4096];
	size_t n;
	const char *del = " (deleted)";

	if (!strcmp(e->path, "[vdso]"))
		return get_vdso(s);
	if (e->path[0] != '/')
		return NULL;
	snprintf(path, sizeof(path), "%s", e->path);
	n = strlen(path);
	if (n > strlen(del) && !strcmp(path + n - strlen(del), del))
		path[n - strlen(del)] = 0;
	return get_elf(s, path, e->ino);
}

enum sym_result symbolize_user(struct symbolizer *s, const struct proc_maps *m, uint64_t addr,
			       char *buf, size_t len)
{
	const struct map_entry *e = find_map(m, addr);
	struct elf_file *f;
	uint64_t vaddr;
	long i;

	if (!e || (e->path[0] != '/' && strcmp(e->path, "[vdso]"))) {
		snprintf(buf, len, "[unknown]");
		return SYM_UNKNOWN;
	}
	f = map_file(s, e);
	if (f && f->ok && file_off_to_vaddr(f, addr - e->start + e->off, &vaddr, NULL) == 0) {
		i = find_esym(f, vaddr);
		if (i >= 0) {
			snprintf(buf, len, "%s", f->names.p + f->syms[i].name);
			return SYM_FUNC;
		}
	}
	module_name(e->path, buf, len);
	return SYM_MODULE;
}

/* Reads len bytes at file offset off of f. */
static int read_code(const struct elf_file *f, uint64_t off, unsigned char *buf, size_t len)
{
	if (f->image) {
		if (off + len > f->image_len)
			return -1;
		memcpy(buf, f->image + off, len);
		return 0;
	}
	if (f->fd < 0)
		return -1;
	return pread(f->fd, buf, len, off) == (ssize_t)len ? 0 : -1;
}

int symbolize_is_return_address(struct symbolizer *s, const struct proc_maps *m, uint64_t addr)
{
	const struct map_entry *e = find_map(m, addr);
	struct elf_file *f;
	unsigned char c[7];
	uint64_t off, vaddr;
	int exec = 0;

	if (!e || !e->exec)
		return 0;
	f = map_file(s, e);
	if (!f || !f->ok)
		return 0;
	off = addr - e->start + e->off;
	if (off < sizeof(c) || file_off_to_vaddr(f, off, &vaddr, &exec) || !exec)
		return 0;
	if (read_code(f, off - sizeof(c), c, sizeof(c)))
		return 0;
	/* c[6] is the byte just before addr */
	if (c[2] == 0xe8)                                        /* call rel32 */
		return 1;
	if (c[1] == 0xff && (c[2] == 0x15 || (c[2] & 0xf8) == 0x90)) /* call *disp32(%rip|reg) */
		return 1;
	if (c[5] == 0xff && (c[6] & 0xf8) == 0xd0)               /* call *%reg */
		return 1;
	if (c[4] == 0xff && (c[5] & 0xf8) == 0x50)               /* call *disp8(%reg) */
		return 1;
	return 0;
}

enum frame_state symbolize_frame_state(struct symbolizer *s, const struct proc_maps *m,
				       uint64_t addr)
{
	const struct map_entry *e = find_map(m, addr);
	struct elf_file *f;
	unsigned char c[8];
	uint64_t vaddr, off, fstart, fstart_off = 0, k;
	size_t i;
	long sym;
	int exec = 0, endbr;

	if (!e || !e->exec)
		return FRAME_UNKNOWN;
	f = map_file(s, e);
	if (!f || !f->ok)
		return FRAME_UNKNOWN;
	off = addr - e->start + e->off;
	if (file_off_to_vaddr(f, off, &vaddr, &exec) || !exec)
		return FRAME_UNKNOWN;
	sym = find_esym(f, vaddr);
	if (sym < 0)
		return FRAME_UNKNOWN;
	fstart = f->syms[sym].addr;
	for (i = 0; i < f->nsegs; i++) {
		const struct eseg *g = &f->segs[i];

		if (fstart >= g->vaddr && fstart < g->vaddr + g->filesz) {
			fstart_off = fstart - g->vaddr + g->off;
			break;
		}
	}
	if (i == f->nsegs || read_code(f, fstart_off, c, sizeof(c)))
		return FRAME_UNKNOWN;
	endbr = c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa;
	k = endbr ? 4 : 0;
	/* push %rbp; mov %rsp,%rbp (48 89 e5, or 48 8b ec) */
	if (c[k] != 0x55 || c[k + 1] != 0x48 ||
	    !((c[k + 2] == 0x89 && c[k + 3] == 0xe5) || (c[k + 2] == 0x8b && c[k + 3] == 0xec)))
		return FRAME_NONE;
	if (vaddr - fstart <= k)
		return FRAME_AT_ENTRY;
	if (vaddr - fstart <= k + 1)
		return FRAME_PUSHED;
	return FRAME_SET;
}
