/* Frame names: blazesym for the lookups, and what it does not do (see frames.h). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blazesym.h>
#include "frames.h"
#include "trace_helpers.h"

struct map_entry {
	uint64_t start, end, off;
	unsigned long ino;
	int exec;
	char *path;
};

/* One image's maps; the images of every process are a list (frames.images). */
struct proc_maps {
	struct proc_maps *next;
	pid_t tgid; /* -1: replaced, freed by frames_forget_gone */
	uint64_t id;
	struct map_entry *v;
	size_t n;
};

/* A mapped file, opened once: blazesym reads it as /proc/self/fd/N, so that a file replaced
 * at the same path (a rebuilt binary) is another source, never named for the mapped one. */
struct elf_file {
	struct elf_file *next;
	char *path;
	unsigned long ino;
	int fd;       /* -1: the file at path is not the one mapped (gone, replaced) */
	char src[32]; /* "/proc/self/fd/N" */
	Elf *elf;     /* for the PLT and the debug file, opened at the first lookup */
	char debug[128]; /* its separate debug file, "" for none */
};

struct frames {
	blaze_symbolizer *sym;
	struct proc_maps *images;
	struct elf_file *files;
};

struct frames *frames_new(void)
{
	/* no auto_reload: a file is a source of its own (elf_file), nothing to stat per call */
	blaze_symbolizer_opts o = { .type_size = sizeof(o), .demangle = true };
	struct frames *fr = calloc(1, sizeof(*fr));

	if (!fr || elf_version(EV_CURRENT) == EV_NONE || !(fr->sym = blaze_symbolizer_new_opts(&o))) {
		free(fr);
		return NULL;
	}
	return fr;
}

void frames_free(struct frames *fr)
{
	struct proc_maps *m, *nm;
	struct elf_file *f, *nf;

	if (!fr)
		return;
	for (m = fr->images; m; m = nm)
		nm = m->next, proc_maps_free(m);
	for (f = fr->files; f; f = nf) {
		nf = f->next;
		elf_end(f->elf);
		if (f->fd >= 0)
			close(f->fd);
		free(f->path);
		free(f);
	}
	blaze_symbolizer_free(fr->sym);
	free(fr);
}

void proc_maps_free(struct proc_maps *m)
{
	for (size_t i = 0; m && i < m->n; i++)
		free(m->v[i].path);
	free(m ? m->v : NULL);
	free(m);
}

/* The file mappings (and the vDSO) of a maps file read from f; anonymous memory is left out.
 * NULL when f holds none (an exited process's file is empty) or out of memory. */
struct proc_maps *proc_maps_parse(FILE *f)
{
	struct proc_maps *m = calloc(1, sizeof(*m));
	unsigned long long start, end, off;
	unsigned long ino;
	char perms[8], *line = NULL, *path;
	size_t cap = 0, len = 0;
	ssize_t n;
	int pos, oom = 0;

	while (m && (n = getline(&line, &len, f)) > 0) {
		struct map_entry *nv = m->v;

		pos = 0;
		line[n - 1] = line[n - 1] == '\n' ? 0 : line[n - 1];
		if (sscanf(line, "%llx-%llx %7s %llx %*x:%*x %lu %n", &start, &end, perms, &off, &ino,
			   &pos) < 5 || !pos || (line[pos] != '/' && strcmp(line + pos, "[vdso]")))
			continue;
		if (m->n == cap && (nv = realloc(m->v, (cap = cap ? 2 * cap : 64) * sizeof(*nv))))
			m->v = nv;
		if ((oom = !nv || !(path = strdup(line + pos))))
			break;
		m->v[m->n++] = (struct map_entry){ start, end, off, ino, perms[2] == 'x', path };
	}
	free(line);
	if (m && (!m->n || oom)) {
		proc_maps_free(m);
		m = NULL;
	}
	return m;
}

struct proc_maps *proc_maps_read(pid_t pid)
{
	char path[64];
	struct proc_maps *m;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "re")))
		return NULL;
	m = proc_maps_parse(f);
	fclose(f);
	return m;
}

void frames_set_image(struct frames *fr, pid_t tgid, uint64_t image, struct proc_maps *m)
{
	struct proc_maps *old = (struct proc_maps *)frames_image(fr, tgid, image);

	if (old)
		old->tgid = -1;
	m->tgid = tgid;
	m->id = image;
	m->next = fr->images;
	fr->images = m;
}

const struct proc_maps *frames_image(const struct frames *fr, pid_t tgid, uint64_t image)
{
	for (struct proc_maps *m = fr->images; m; m = m->next)
		if (m->tgid == tgid && m->id == image)
			return m;
	return NULL;
}

void frames_forget_gone(struct frames *fr)
{
	for (struct proc_maps **p = &fr->images, *m; (m = *p);) {
		if (m->tgid < 0 || (kill(m->tgid, 0) && errno == ESRCH)) {
			*p = m->next;
			proc_maps_free(m);
		} else {
			p = &m->next;
		}
	}
}

static const struct map_entry *find_map(const struct proc_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m ? m->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < m->v[lo - 1].end ? &m->v[lo - 1] : NULL;
}

/* The file mapped at addr in m (NULL: none); addr's offset in it into *off, and whether the
 * mapping is executable into *exec. */
static struct elf_file *file_at(struct frames *fr, const struct proc_maps *m, uint64_t addr,
				uint64_t *off, int *exec)
{
	static const char del[] = " (deleted)";
	const struct map_entry *e = find_map(m, addr);
	size_t n = e ? strlen(e->path) : 0;
	int vdso = e && !strcmp(e->path, "[vdso]");
	struct elf_file *f;
	struct stat st;

	if (!e)
		return NULL;
	*off = addr - e->start + e->off;
	*exec = e->exec;
	if (n > sizeof(del) - 1 && !strcmp(e->path + n - (sizeof(del) - 1), del))
		n -= sizeof(del) - 1;
	for (f = fr->files; f; f = f->next)
		if ((vdso || f->ino == e->ino) && !strncmp(f->path, e->path, n) && !f->path[n])
			return f;
	if (!(f = calloc(1, sizeof(*f))) || !(f->path = strndup(e->path, n))) {
		free(f);
		return NULL;
	}
	f->ino = e->ino;
	/* the vDSO is the same image in every process of this kernel: ours */
	f->fd = vdso ? vdso_image_fd() : open(f->path, O_RDONLY | O_CLOEXEC);
	if (f->fd >= 0 && !vdso && (fstat(f->fd, &st) || st.st_ino != e->ino)) {
		close(f->fd);
		f->fd = -1;
	}
	snprintf(f->src, sizeof(f->src), "/proc/self/fd/%d", f->fd);
	f->next = fr->files;
	fr->files = f;
	return f;
}

/* PLT stubs have no symbol: "name@plt" into buf (the attribution rules read memcpy@plt) for
 * the x86-64 stub at file offset off, after the GOT slot its `jmp *disp32(%rip)` goes
 * through and the JUMP_SLOT or GLOB_DAT relocation that fills the slot with a .dynsym symbol.
 * The stub's start into *stub. 0, or -1 when off is in no such stub. */
static int plt_name(struct elf_file *f, uint64_t off, char *buf, size_t len, uint64_t *stub)
{
	Elf_Scn *scn = NULL, *lscn;
	GElf_Shdr sh, lsh;
	GElf_Ehdr eh;
	Elf_Data *d, *syms;
	GElf_Rela r;
	GElf_Sym sym;
	const char *name;
	unsigned char c[32];
	uint64_t slot = 0, ent;
	size_t shstrndx;
	int32_t disp;

	if (!f->elf || !gelf_getehdr(f->elf, &eh) || eh.e_machine != EM_X86_64 ||
	    elf_getshdrstrndx(f->elf, &shstrndx))
		return -1;
	while (!slot && (scn = elf_nextscn(f->elf, scn))) { /* .plt, .plt.sec, .plt.got */
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || off < sh.sh_offset ||
		    off - sh.sh_offset >= sh.sh_size ||
		    !(name = elf_strptr(f->elf, shstrndx, sh.sh_name)) || strncmp(name, ".plt", 4))
			continue;
		ent = sh.sh_entsize && sh.sh_entsize <= sizeof(c) ? sh.sh_entsize : 16;
		*stub = off - (off - sh.sh_offset) % ent;
		if (pread(f->fd, c, ent, *stub) != (ssize_t)ent)
			return -1;
		for (uint64_t k = 0; !slot && k + 6 <= ent; k++)
			if (c[k] == 0xff && c[k + 1] == 0x25) {
				memcpy(&disp, c + k + 2, 4);
				slot = sh.sh_addr + (*stub - sh.sh_offset) + k + 6 + (int64_t)disp;
			}
	}
	for (scn = NULL; slot && (scn = elf_nextscn(f->elf, scn));) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize ||
		    !(lscn = elf_getscn(f->elf, sh.sh_link)) || !gelf_getshdr(lscn, &lsh) ||
		    lsh.sh_type != SHT_DYNSYM || !(d = elf_getdata(scn, NULL)) ||
		    !(syms = elf_getdata(lscn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && gelf_getrela(d, i, &r); i++) {
			unsigned type = GELF_R_TYPE(r.r_info);

			if (r.r_offset == slot && (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) &&
			    gelf_getsym(syms, GELF_R_SYM(r.r_info), &sym) &&
			    (name = elf_strptr(f->elf, lsh.sh_link, sym.st_name)) && *name) {
				snprintf(buf, len, "%s@plt", name);
				return 0;
			}
		}
	}
	return -1;
}

/* blazesym's name of addr (a file offset, or with virt a virtual address) in the ELF file at
 * path into buf, from its symbol tables (no DWARF: other names, and tens of MB); 1 (with addr's
 * offset in the symbol and whether the symbol has a size), or 0. */
static int blaze_name(struct frames *fr, const char *path, uint64_t addr, int virt, char *buf,
		      size_t len, uint64_t *in_sym, int *sized)
{
	blaze_symbolize_src_elf src = { .type_size = sizeof(src), .path = path };
	const blaze_syms *r = virt ? blaze_symbolize_elf_virt_offsets(fr->sym, &src, &addr, 1) :
				     blaze_symbolize_elf_file_offsets(fr->sym, &src, &addr, 1);
	int named = r && r->cnt == 1 && r->syms[0].name && r->syms[0].name[0];

	if (named) {
		snprintf(buf, len, "%s", r->syms[0].name);
		*in_sym = r->syms[0].offset;
		*sized = r->syms[0].size > 0;
	}
	blaze_syms_free(r);
	return named;
}

enum sym_result frames_user_name(struct frames *fr, const struct proc_maps *m, uint64_t addr,
				 char *buf, size_t len, uint64_t *fn_off)
{
	uint64_t off = 0, va, in_sym = 0, unused;
	int exec = 0, named, sized = 0;
	struct elf_file *f = file_at(fr, m, addr, &off, &exec);

	fn_off = fn_off ? fn_off : &unused;
	*fn_off = ~0ULL;
	if (!f) {
		snprintf(buf, len, "[unknown]");
		return SYM_UNKNOWN;
	}
	if (f->fd >= 0 && !f->elf && (f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL)))
		elf_debug_file(f->elf, f->src, f->debug, sizeof(f->debug));
	/* a stripped file (libc): its exported names, else its debug file's .symtab */
	named = f->elf && (blaze_name(fr, f->src, off, 0, buf, len, &in_sym, &sized) ||
			   (f->debug[0] && !elf_file_vaddr(f->elf, off, &va) &&
			    blaze_name(fr, f->debug, va, 1, buf, len, &in_sym, &sized)));
	if (named)
		*fn_off = off - in_sym;
	/* a symbol of no size reaches to the next one: over the PLT (_init) for blazesym */
	if ((!sized && exec && plt_name(f, off, buf, len, fn_off) == 0) || named)
		return SYM_FUNC;
	snprintf(buf, len, "[%s]", strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path);
	return SYM_MODULE;
}

int frames_is_return_address(struct frames *fr, const struct proc_maps *m, uint64_t addr)
{
	uint64_t off = 0;
	int exec = 0;
	struct elf_file *f = file_at(fr, m, addr, &off, &exec);
	unsigned char c[7]; /* c[6]: the byte just before addr */

	if (!f || !exec || f->fd < 0 || off < 7 || pread(f->fd, c, 7, off - 7) != 7)
		return 0;
	return c[2] == 0xe8 ||                                          /* call rel32 */
	       (c[1] == 0xff && (c[2] == 0x15 || (c[2] & 0xf8) == 0x90)) || /* call *disp32(..) */
	       (c[5] == 0xff && (c[6] & 0xf8) == 0xd0) ||                 /* call *%reg */
	       (c[4] == 0xff && (c[5] & 0xf8) == 0x50);                   /* call *disp8(%reg) */
}

/* 1 when the function that starts at file offset fn_off has no frame of its own at address
 * addr: no `push %rbp; mov %rsp,%rbp` prologue, or addr is at the push (the word at the stack
 * pointer is then the return address); 0 when it has one; -1 when unknown (no symbol: the
 * caller is not guessed). */
static int frameless_at(struct frames *fr, const struct proc_maps *m, uint64_t addr,
			uint64_t fn_off)
{
	uint64_t off = 0;
	int k, exec = 0;
	struct elf_file *f = file_at(fr, m, addr, &off, &exec);
	unsigned char c[8];

	if (!f || !exec || f->fd < 0 || fn_off == ~0ULL || off < fn_off ||
	    pread(f->fd, c, 8, fn_off) != 8)
		return -1;
	k = c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa ? 4 : 0; /* endbr64 */
	if (c[k] != 0x55 || c[k + 1] != 0x48 ||
	    !((c[k + 2] == 0x89 && c[k + 3] == 0xe5) || (c[k + 2] == 0x8b && c[k + 3] == 0xec)))
		return 1;
	return off - fn_off <= (uint64_t)k;
}

void frames_user_stack(struct frames *fr, const struct proc_maps *m, const uint64_t *ips,
		       int n, int have_ret, uint64_t ret,
		       void (*emit)(void *ctx, const char *name), void *ctx)
{
	char name[512], caller[512];
	uint64_t fn_off;
	int i, insert = 0;

	for (i = n - 1; i >= 0; i--) {
		frames_user_name(fr, m, i ? ips[i] - 1 : ips[i], name, sizeof(name), &fn_off);

		/* The walk starts at the caller's caller when the innermost function has no
		 * frame of its own (a frameless leaf such as libc's memcpy variants, or a sample
		 * at a function's first instruction): the word at the stack pointer is then the
		 * return address into the skipped caller. Put back only when it follows a call
		 * and the walk does not already have it. */
		if (i == 0 && have_ret && m && (n < 2 || ips[1] != ret)) {
			if (frameless_at(fr, m, ips[0], fn_off) == 1 &&
			    frames_is_return_address(fr, m, ret)) {
				frames_user_name(fr, m, ret - 1, caller, sizeof(caller), NULL);
				insert = 1;
			}
		}
		if (insert)
			emit(ctx, caller);
		emit(ctx, name);
	}
}
