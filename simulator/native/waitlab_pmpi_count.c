/* waitlab_pmpi_count.c: the layer's record count while the program runs (WAITLAB_OUT/count, see waitlab_pmpi.c).
 * Part of waitlab's measurement layer: #included by waitlab_pmpi.c before waitlab_pmpi_comms.c (whose wl_start
 * opens it; wl_push updates it).  Not compiled on its own. */

/* This rank's slot of WAITLAB_OUT/count (see waitlab_pmpi.c): the file is sized for every rank (each rank's
 * ftruncate gives it the same size) and mapped shared; on any failure there is no count, and nothing else changes. */
static void wl_count_open(void)
{
  const char* dir = getenv("WAITLAB_OUT");
  char path[4096];
  if (dir == NULL || *dir == '\0' || snprintf(path, sizeof path, "%s/count", dir) >= (int)sizeof path)
    return;
  int fd = open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0)
    return;
  size_t size = (size_t)wl_size * sizeof(wl_count_t);
  struct stat st;
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && ((size_t)st.st_size >= size || ftruncate(fd, (off_t)size) == 0))
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED)
    wl_count = (volatile wl_count_t*)p + wl_rank;
}
