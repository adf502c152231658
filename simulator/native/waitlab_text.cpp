/* Rows of text from columns, by a template (issue 25: waitlab's own work around a program run).
 * Used by simulator/native_text.py through ctypes; built with the system C++ compiler (C++17, for std::to_chars).
 * The Chrome trace of a run (simulator/chrome_trace.py) and the time-independent trace SMPI replays
 * (simulator/trace.py) are written with it: every record or line is one template filled from numpy columns, the
 * rows joined by a separator.  Their references are the texts written one by one with Python's own formatting
 * (tests/test_trace_text_columnwise.py, tests/test_trace_lines_native.py).
 *
 * A template is a list of parts; each part is one of
 *   LIT    a constant text;
 *   INT    an int64 column, in decimal (as Python's str of an int);
 *   US     an int64 column of nanoseconds, as microseconds "q.rrr2" (chrome_trace.us_text: q, r = divmod(ns, 1000));
 *   LABEL  an int64 column of codes into a table of texts (a code out of the table: -1, the caller's error);
 *   IFINT  a constant text and an int64 column in decimal, on rows whose uint8 mask is not 0, else nothing;
 *   TEXT   a text of each row (a table with one entry per row, most of them empty);
 *   IFREPR a constant text and a double column as Python's repr() writes it, on rows whose uint8 mask is not 0.
 * A table of texts is one buffer of bytes and n + 1 int64 offsets.
 */
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

enum { P_LIT, P_INT, P_US, P_LABEL, P_IFINT, P_TEXT, P_IFREPR };

typedef struct {
  const char* bytes;
  const int64_t* offsets;
  int64_t n;
} wl_texts_t;

static char* put_int(char* out, int64_t v)
{
  return std::to_chars(out, out + 24, v).ptr; /* two digits at a time; the same text as Python's str */
}

static char* put_us(char* out, int64_t ns)
{
  int64_t q = ns / 1000, r = ns % 1000;
  if (r < 0) { /* floor division, as numpy's and Python's divmod */
    r += 1000;
    q -= 1;
  }
  out = put_int(out, q);
  *out++ = '.';
  *out++ = (char)('0' + (int)(r / 100));
  *out++ = (char)('0' + (int)(r / 10 % 10));
  *out++ = (char)('0' + (int)(r % 10));
  *out++ = '2';
  return out;
}

/* x as Python's repr(float) writes it: the shortest digits that read back as x (std::to_chars, the same digits as
 * Python's dtoa), in positional notation when 1e-4 <= |x| < 1e16 (with ".0" when whole), else as d.ddde+XX. */
static char* put_repr(char* out, double x)
{
  if (std::isnan(x)) {
    memcpy(out, "nan", 3);
    return out + 3;
  }
  if (std::signbit(x)) {
    *out++ = '-';
    x = -x;
  }
  if (std::isinf(x)) {
    memcpy(out, "inf", 3);
    return out + 3;
  }
  if (x == 0.0) {
    memcpy(out, "0.0", 3);
    return out + 3;
  }
  if (x < 1e16 && x == std::floor(x)) { /* a whole number: its shortest digits are its own (no other number within */
    out = put_int(out, (int64_t)x);    /* half a spacing is a multiple of 10), so repr writes it and ".0" */
    *out++ = '.';
    *out++ = '0';
    return out;
  }
  char sci[40];
  const char* end = std::to_chars(sci, sci + sizeof sci, x, std::chars_format::scientific).ptr;
  char digits[24];
  int nd = 0;
  const char* p = sci;
  for (; p < end && *p != 'e'; p++)
    if (*p != '.')
      digits[nd++] = *p;
  const int negative = p[1] == '-';
  int e = 0;
  for (p += 2; p < end; p++)
    e = e * 10 + (*p - '0');
  if (negative)
    e = -e;
  const int decpt = e + 1; /* x = 0.d1d2... x 10^decpt */
  if (decpt <= -4 || decpt > 16) {
    *out++ = digits[0];
    if (nd > 1) {
      *out++ = '.';
      memcpy(out, digits + 1, (size_t)(nd - 1));
      out += nd - 1;
    }
    *out++ = 'e';
    *out++ = e < 0 ? '-' : '+';
    int a = e < 0 ? -e : e;
    if (a >= 100) {
      *out++ = (char)('0' + a / 100);
      a %= 100;
    }
    *out++ = (char)('0' + a / 10);
    *out++ = (char)('0' + a % 10);
    return out;
  }
  if (decpt <= 0) {
    *out++ = '0';
    *out++ = '.';
    for (int i = 0; i < -decpt; i++)
      *out++ = '0';
    memcpy(out, digits, (size_t)nd);
    return out + nd;
  }
  if (decpt >= nd) {
    memcpy(out, digits, (size_t)nd);
    out += nd;
    for (int i = nd; i < decpt; i++)
      *out++ = '0';
    *out++ = '.';
    *out++ = '0';
    return out;
  }
  memcpy(out, digits, (size_t)decpt);
  out += decpt;
  *out++ = '.';
  memcpy(out, digits + decpt, (size_t)(nd - decpt));
  return out + nd - decpt;
}

static char* put_text(char* out, const wl_texts_t* t, int64_t i)
{
  int64_t a = t->offsets[i], b = t->offsets[i + 1];
  memcpy(out, t->bytes + a, (size_t)(b - a));
  return out + (b - a);
}

/* Fill rows [0, n_rows) of the template (kind[k], a[k], b[k], c[k] of its n_parts parts: LIT a text table and
 * its entry b; INT, US a column a; LABEL a column a and a text table b; IFINT and IFREPR a column a (int64 or
 * double), a mask b and a text table c whose entry 0 is the constant; TEXT a text table a) into out, rows joined by
 * the sep_len bytes of sep (at most 8).  Returns the bytes written, or -1 when a code is outside its table or out
 * (cap bytes) would overflow. */
extern "C" int64_t wl_text_rows(int64_t n_rows, int32_t n_parts, const int32_t* kind, const int32_t* a,
                                const int32_t* b, const int32_t* c, const void* const* columns,
                                const uint8_t* const* masks, const wl_texts_t* texts, const char* sep,
                                int64_t sep_len, char* out, int64_t cap)
{
  char* p = out;
  char* end = out + cap;
  if (sep_len < 0 || sep_len > 8)
    return -1;
  for (int64_t i = 0; i < n_rows; i++) {
    if (i) {
      if (end - p < 64)
        return -1;
      memcpy(p, sep, (size_t)sep_len);
      p += sep_len;
    }
    for (int32_t k = 0; k < n_parts; k++) {
      if (end - p < 64) /* the longest number (26 bytes, a repr 24) and separator, with room */
        return -1;
      const wl_texts_t* t;
      int64_t v;
      switch (kind[k]) {
        case P_LIT:
          t = &texts[a[k]];
          if (end - p < t->offsets[b[k] + 1] - t->offsets[b[k]] + 64)
            return -1;
          p = put_text(p, t, b[k]);
          break;
        case P_INT: p = put_int(p, ((const int64_t*)columns[a[k]])[i]); break;
        case P_US: p = put_us(p, ((const int64_t*)columns[a[k]])[i]); break;
        case P_LABEL:
          t = &texts[b[k]];
          v = ((const int64_t*)columns[a[k]])[i];
          if (v < 0 || v >= t->n || end - p < t->offsets[v + 1] - t->offsets[v] + 64)
            return -1;
          p = put_text(p, t, v);
          break;
        case P_IFINT:
        case P_IFREPR: /* the constant, then the row's number: an int64 or a double */
          if (masks[b[k]][i]) {
            t = &texts[c[k]];
            if (end - p < t->offsets[1] - t->offsets[0] + 64)
              return -1;
            p = put_text(p, t, 0);
            p = kind[k] == P_IFINT ? put_int(p, ((const int64_t*)columns[a[k]])[i])
                                   : put_repr(p, ((const double*)columns[a[k]])[i]);
          }
          break;
        case P_TEXT:
          t = &texts[a[k]];
          if (end - p < t->offsets[i + 1] - t->offsets[i] + 64)
            return -1;
          p = put_text(p, t, i);
          break;
        default: return -1;
      }
    }
  }
  return p - out;
}
