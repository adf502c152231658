/* Fast OTF2 event reader for waitlab's OTF2 import (simulator/otf2_import.py).
 *
 * The Python bindings of OTF2 call a Python function per event through ctypes (about 40-300 k events/s);
 * this file reads every location's events with OTF2's local event readers in C and writes one fixed-size
 * record per event that matters to a file Python maps with numpy.  Definitions (regions, communicators,
 * groups, locations, clock) stay with the Python bindings: they are few.
 *
 * Built by waitlab.simulator.otf2_import with the system C compiler, linked against the libotf2 the Python
 * bindings ship (``_otf2/_otf2.so``).  No OTF2 header is installed on Debian (only the bindings), so the few
 * prototypes used are declared here, in the types of OTF2 3.0's public API (they match the ctypes
 * declarations of the bindings, ``_otf2/EvtReaderCallbacks.py`` and ``_otf2/Reader.py``).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct OTF2_Reader OTF2_Reader;
typedef struct OTF2_EvtReader OTF2_EvtReader;
typedef struct OTF2_DefReader OTF2_DefReader;
typedef struct OTF2_EvtReaderCallbacks OTF2_EvtReaderCallbacks;
typedef struct OTF2_AttributeList OTF2_AttributeList;
typedef int OTF2_ErrorCode;
typedef int OTF2_CallbackCode;
typedef uint64_t Loc;
typedef uint64_t Ts;

OTF2_Reader* OTF2_Reader_Open(const char* anchor);
OTF2_ErrorCode OTF2_Reader_Close(OTF2_Reader*);
OTF2_ErrorCode OTF2_Reader_SetSerialCollectiveCallbacks(OTF2_Reader*);
OTF2_ErrorCode OTF2_Reader_SelectLocation(OTF2_Reader*, Loc);
OTF2_ErrorCode OTF2_Reader_OpenDefFiles(OTF2_Reader*);
OTF2_ErrorCode OTF2_Reader_CloseDefFiles(OTF2_Reader*);
OTF2_ErrorCode OTF2_Reader_OpenEvtFiles(OTF2_Reader*);
OTF2_ErrorCode OTF2_Reader_CloseEvtFiles(OTF2_Reader*);
OTF2_DefReader* OTF2_Reader_GetDefReader(OTF2_Reader*, Loc);
OTF2_ErrorCode OTF2_Reader_ReadAllLocalDefinitions(OTF2_Reader*, OTF2_DefReader*, uint64_t*);
OTF2_ErrorCode OTF2_Reader_CloseDefReader(OTF2_Reader*, OTF2_DefReader*);
OTF2_EvtReader* OTF2_Reader_GetEvtReader(OTF2_Reader*, Loc);
OTF2_ErrorCode OTF2_Reader_CloseEvtReader(OTF2_Reader*, OTF2_EvtReader*);
OTF2_ErrorCode OTF2_Reader_RegisterEvtCallbacks(OTF2_Reader*, OTF2_EvtReader*, const OTF2_EvtReaderCallbacks*, void*);
OTF2_ErrorCode OTF2_Reader_ReadAllLocalEvents(OTF2_Reader*, OTF2_EvtReader*, uint64_t*);
OTF2_EvtReaderCallbacks* OTF2_EvtReaderCallbacks_New(void);
void OTF2_EvtReaderCallbacks_Delete(OTF2_EvtReaderCallbacks*);
const char* OTF2_Error_GetName(OTF2_ErrorCode);
typedef OTF2_ErrorCode (*OTF2_ErrorCallback)(void*, const char*, uint64_t, const char*, OTF2_ErrorCode, const char*,
                                             va_list);
OTF2_ErrorCallback OTF2_Error_RegisterCallback(OTF2_ErrorCallback, void*);
const char* OTF2_Error_GetDescription(OTF2_ErrorCode);

/* Record kinds: the contract with simulator/otf2_import.py (RECORD_KINDS there). */
enum { K_ENTER, K_LEAVE, K_SEND, K_ISEND, K_ISEND_DONE, K_IRECV_REQ, K_RECV, K_IRECV, K_COLL_BEGIN, K_COLL_END,
       K_TEST, K_CANCEL, K_NBC_DONE, K_UNSUPPORTED = 100 };

typedef struct {
    uint64_t loc, time, d, e;  /* d: bytes / request / bytes sent; e: request / bytes received */
    uint32_t kind, a, b, c;    /* a: region (b = 1: calling context) / peer / collective op / unsupported record;
                                * b: comm; c: tag / root */
} Rec;

typedef struct {
    FILE* out;
    uint64_t n;
    int failed;
} Sink;

static int put(void* ud, Loc loc, Ts t, uint32_t kind, uint32_t a, uint32_t b, uint32_t c, uint64_t d,
               uint64_t e) {
    Sink* s = (Sink*)ud;
    Rec r = {loc, t, d, e, kind, a, b, c};
    if (fwrite(&r, sizeof r, 1, s->out) != 1) {
        s->failed = 1;
        return 1; /* OTF2_CALLBACK_INTERRUPT */
    }
    s->n++;
    return 0;
}

#define HEAD Loc l, Ts t, uint64_t pos, void* ud, OTF2_AttributeList* al
static OTF2_CallbackCode enter(HEAD, uint32_t region) { return put(ud, l, t, K_ENTER, region, 0, 0, 0, 0); }
static OTF2_CallbackCode leave(HEAD, uint32_t region) { return put(ud, l, t, K_LEAVE, region, 0, 0, 0, 0); }
static OTF2_CallbackCode send(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len) {
    return put(ud, l, t, K_SEND, peer, comm, tag, len, 0);
}
static OTF2_CallbackCode isend(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len, uint64_t req) {
    return put(ud, l, t, K_ISEND, peer, comm, tag, len, req);
}
static OTF2_CallbackCode isend_done(HEAD, uint64_t req) { return put(ud, l, t, K_ISEND_DONE, 0, 0, 0, req, 0); }
static OTF2_CallbackCode irecv_req(HEAD, uint64_t req) { return put(ud, l, t, K_IRECV_REQ, 0, 0, 0, req, 0); }
static OTF2_CallbackCode recv(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len) {
    return put(ud, l, t, K_RECV, peer, comm, tag, len, 0);
}
static OTF2_CallbackCode irecv(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len, uint64_t req) {
    return put(ud, l, t, K_IRECV, peer, comm, tag, len, req);
}
static OTF2_CallbackCode test(HEAD, uint64_t req) { return put(ud, l, t, K_TEST, 0, 0, 0, req, 0); }
static OTF2_CallbackCode cancel(HEAD, uint64_t req) { return put(ud, l, t, K_CANCEL, 0, 0, 0, req, 0); }
static OTF2_CallbackCode coll_begin(HEAD) { return put(ud, l, t, K_COLL_BEGIN, 0, 0, 0, 0, 0); }
static OTF2_CallbackCode coll_end(HEAD, uint8_t op, uint32_t comm, uint32_t root, uint64_t sent, uint64_t got) {
    return put(ud, l, t, K_COLL_END, op, comm, root, sent, got);
}

/* Score-P with unwinding (SCOREP_ENABLE_UNWINDING=true) writes a region's enter and leave as CallingContextEnter /
 * CallingContextLeave: the region entered or left is the calling context's own region (its definition's).  They are
 * enter/leave records with b = 1: a is a calling context, which otf2_import.py maps to its region (the frames the
 * unwinding found between two instrumented regions are in the context's parents only: no record enters them). */
static OTF2_CallbackCode cc_enter(HEAD, uint32_t context, uint32_t unwind_distance) {
    (void)unwind_distance;
    return put(ud, l, t, K_ENTER, context, 1, 0, 0, 0);
}
static OTF2_CallbackCode cc_leave(HEAD, uint32_t context) { return put(ud, l, t, K_LEAVE, context, 1, 0, 0, 0); }

/* A non-blocking collective is booked where it completes (as waitlab's measurement layer does); its request
 * record carries nothing more. */
static OTF2_CallbackCode nbc_done(HEAD, uint8_t op, uint32_t comm, uint32_t root, uint64_t sent, uint64_t got,
                                  uint64_t req) {
    (void)req;
    return put(ud, l, t, K_NBC_DONE, op, comm, root, sent, got);
}

typedef OTF2_ErrorCode (*Setter)(OTF2_EvtReaderCallbacks*, void*);
#define SETTER(name) OTF2_ErrorCode OTF2_EvtReaderCallbacks_Set##name##Callback(OTF2_EvtReaderCallbacks*, void*);
#define UNSUPPORTED(X)                                                                                        \
    X(ThreadFork) X(ThreadJoin) X(ThreadTeamBegin) X(ThreadTeamEnd) X(ThreadAcquireLock) X(ThreadReleaseLock)  \
    X(ThreadTaskCreate) X(ThreadTaskSwitch) X(ThreadTaskComplete) X(ThreadCreate) X(ThreadBegin) X(ThreadWait)   \
    X(ThreadEnd) X(OmpFork) X(OmpJoin) X(OmpAcquireLock) X(OmpReleaseLock) X(OmpTaskCreate) X(OmpTaskSwitch)    \
    X(OmpTaskComplete) X(RmaWinCreate) X(RmaWinDestroy) X(RmaCollectiveBegin) X(RmaCollectiveEnd)               \
    X(RmaGroupSync) X(RmaRequestLock) X(RmaAcquireLock) X(RmaTryLock) X(RmaReleaseLock) X(RmaSync)              \
    X(RmaWaitChange) X(RmaPut) X(RmaGet) X(RmaAtomic) X(RmaOpCompleteBlocking) X(RmaOpCompleteNonBlocking)      \
    X(RmaOpTest) X(RmaOpCompleteRemote) X(IoCreateHandle) X(IoDestroyHandle) X(IoDuplicateHandle) X(IoSeek)     \
    X(IoChangeStatusFlags) X(IoDeleteFile) X(IoOperationBegin) X(IoOperationTest) X(IoOperationIssued)          \
    X(IoOperationComplete) X(IoOperationCancelled) X(IoAcquireLock) X(IoReleaseLock) X(IoTryLock)
/* The records read: OTF2 record type -> callback above (declared and registered from this one list). */
#define KNOWN(X)                                                                                              \
    X(Enter, enter) X(Leave, leave) X(MpiSend, send) X(MpiIsend, isend) X(MpiIsendComplete, isend_done)        \
    X(MpiIrecvRequest, irecv_req) X(MpiRecv, recv) X(MpiIrecv, irecv) X(MpiRequestTest, test)                  \
    X(MpiRequestCancelled, cancel) X(MpiCollectiveBegin, coll_begin) X(MpiCollectiveEnd, coll_end)             \
    X(NonBlockingCollectiveComplete, nbc_done) X(CallingContextEnter, cc_enter) X(CallingContextLeave, cc_leave)
#define KNOWN_SETTER(name, fn) SETTER(name)
#define KNOWN_SET(name, fn) OTF2_EvtReaderCallbacks_Set##name##Callback(cbs, (void*)fn);
KNOWN(KNOWN_SETTER)
UNSUPPORTED(SETTER)
#define NAME(name) #name,
#define FN(name) OTF2_EvtReaderCallbacks_Set##name##Callback,
static const char* const unsupported_names[] = {UNSUPPORTED(NAME) 0};
static const Setter unsupported_setters[] = {UNSUPPORTED(FN) 0};
/* Records that cannot be replayed: one callback per record type of UNSUPPORTED, generated from that one list
 * (U_<name> is its index).  Every OTF2 event callback starts with the same five arguments; the rest are not
 * read. */
#define U_INDEX(name) U_##name,
enum { UNSUPPORTED(U_INDEX) U_COUNT };
#define U_CALLBACK(name)                                                                                      \
    static OTF2_CallbackCode unsup_##name(HEAD) { return put(ud, l, t, K_UNSUPPORTED, U_##name, 0, 0, 0, 0); }
UNSUPPORTED(U_CALLBACK)
#define U_POINTER(name) (void*)unsup_##name,
static void* const unsupported_callbacks[] = {UNSUPPORTED(U_POINTER) 0};

/* Name of unsupported record ``i`` (NULL past the end): Python names the first one a trace holds. */
const char* wl_otf2_unsupported_name(int i) {
    int n = (int)(sizeof unsupported_names / sizeof *unsupported_names) - 1;
    return i >= 0 && i < n ? unsupported_names[i] : 0;
}

/* OTF2's messages go to a buffer instead of stderr: waitlab reports one line of its own. */
static char last_error[512];
static OTF2_ErrorCode keep_error(void* ud, const char* file, uint64_t line, const char* fn, OTF2_ErrorCode code,
                                 const char* fmt, va_list va) {
    (void)ud, (void)file, (void)line, (void)fn;
    vsnprintf(last_error, sizeof last_error, fmt, va);
    return code;
}

/* Silence OTF2's error printing for the whole process (Python's own OTF2 calls included); see
 * wl_otf2_last_error. */
void wl_otf2_quiet(void) { OTF2_Error_RegisterCallback(keep_error, 0); }

/* The last message OTF2 reported since wl_otf2_quiet ("" if none). */
const char* wl_otf2_last_error(void) { return last_error; }

static int fail(char* err, size_t len, const char* what, OTF2_ErrorCode code) {
    snprintf(err, len, "%s: %s (%s%s%s)", what, OTF2_Error_GetName(code), OTF2_Error_GetDescription(code),
             last_error[0] ? ": " : "", last_error);
    return -1;
}

/* Read the events of ``n`` locations of the archive ``anchor`` into ``out_path`` (records of type Rec, each
 * location's records in the order of its events).  Returns the number of records, or -1 with ``err`` set. */
int64_t wl_otf2_read(const char* anchor, int64_t n, const uint64_t* locs, const char* out_path, char* err,
                     size_t err_len) {
    OTF2_ErrorCode rc;
    int64_t result = -1;
    Sink sink = {fopen(out_path, "wb"), 0, 0};
    if (!sink.out) {
        snprintf(err, err_len, "cannot write %s", out_path);
        return -1;
    }
    OTF2_Reader* reader = OTF2_Reader_Open(anchor);
    if (!reader) {
        snprintf(err, err_len, "OTF2 cannot open the archive");
        fclose(sink.out);
        return -1;
    }
    OTF2_EvtReaderCallbacks* cbs = OTF2_EvtReaderCallbacks_New();
    OTF2_Reader_SetSerialCollectiveCallbacks(reader);
    KNOWN(KNOWN_SET)
    for (int i = 0; unsupported_setters[i]; i++)
        unsupported_setters[i](cbs, unsupported_callbacks[i]);
    for (int64_t i = 0; i < n; i++)
        if ((rc = OTF2_Reader_SelectLocation(reader, locs[i])) != 0) {
            fail(err, err_len, "selecting a location", rc);
            goto done;
        }
    int defs_open = OTF2_Reader_OpenDefFiles(reader) == 0;
    if ((rc = OTF2_Reader_OpenEvtFiles(reader)) != 0) {
        fail(err, err_len, "opening the event files", rc);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        if (defs_open) {
            OTF2_DefReader* dr = OTF2_Reader_GetDefReader(reader, locs[i]);
            if (dr) {
                uint64_t read = 0;
                if ((rc = OTF2_Reader_ReadAllLocalDefinitions(reader, dr, &read)) != 0) {
                    fail(err, err_len, "reading a location's definitions", rc);
                    goto done;
                }
                OTF2_Reader_CloseDefReader(reader, dr);
            }
        }
    }
    if (defs_open)
        OTF2_Reader_CloseDefFiles(reader);
    for (int64_t i = 0; i < n; i++) {
        OTF2_EvtReader* er = OTF2_Reader_GetEvtReader(reader, locs[i]);
        if (!er) {
            snprintf(err, err_len, "OTF2 cannot open the events of location %llu (its event file is missing or "
                     "unreadable)", (unsigned long long)locs[i]);
            goto done;
        }
        uint64_t read = 0;
        OTF2_Reader_RegisterEvtCallbacks(reader, er, cbs, &sink);
        rc = OTF2_Reader_ReadAllLocalEvents(reader, er, &read);
        if (sink.failed) {
            snprintf(err, err_len, "cannot write %s (disk full?)", out_path);
            goto done;
        }
        if (rc != 0) {
            char what[96];
            snprintf(what, sizeof what, "reading the events of location %llu", (unsigned long long)locs[i]);
            fail(err, err_len, what, rc);
            goto done;
        }
        OTF2_Reader_CloseEvtReader(reader, er);
    }
    OTF2_Reader_CloseEvtFiles(reader);
    result = (int64_t)sink.n;
done:
    OTF2_EvtReaderCallbacks_Delete(cbs);
    OTF2_Reader_Close(reader);
    if (fclose(sink.out) != 0 && result >= 0) {
        snprintf(err, err_len, "cannot write %s", out_path);
        result = -1;
    }
    return result;
}
