// A one-time HTTP location on the control plane for bytes that do not travel in a stream frame
// (archives, single files, a watch's events): the sidecar, which only ever dials out, GETs or PUTs
// `url` with `Authorization: Bearer <token>`.
import { type Static, Type } from '@sinclair/typebox';

export const BlobRefSchema = Type.Object({ url: Type.String(), token: Type.String() });
export type BlobRefType = Static<typeof BlobRefSchema>;
