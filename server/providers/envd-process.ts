// envd's process service (sandbox-a): a Connect-RPC service declared in protobuf
// (`spec/envd/process/process.proto` in the provider's SDK repository, package `process`). Only
// `Start` is used (exec); its messages are declared here by hand with the file's field numbers and
// types, so the maintained Connect library does the framing instead of us.
import { create, createFileRegistry, type DescMessage, type DescService } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';

const T = { bool: 8, string: 9, message: 11, bytes: 12, uint32: 13, enum: 14, sint32: 17 } as const;
const OPTIONAL = 1;
const REPEATED = 3;

interface F {
  name: string;
  number: number;
  type: keyof typeof T;
  typeName?: string;
  repeated?: boolean;
  oneofIndex?: number;
  proto3Optional?: boolean;
}

const jsonName = (n: string) => n.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

function field(f: F) {
  return {
    name: f.name,
    jsonName: jsonName(f.name),
    number: f.number,
    label: f.repeated ? REPEATED : OPTIONAL,
    type: T[f.type],
    ...(f.typeName ? { typeName: f.typeName } : {}),
    ...(f.oneofIndex !== undefined ? { oneofIndex: f.oneofIndex } : {}),
    ...(f.proto3Optional ? { proto3Optional: true } : {}),
  };
}

function msg(
  name: string,
  fields: F[],
  extra: { nested?: unknown[]; oneofs?: string[]; mapEntry?: boolean } = {},
) {
  return {
    name,
    field: fields.map(field),
    nestedType: extra.nested ?? [],
    oneofDecl: (extra.oneofs ?? []).map((n) => ({ name: n })),
    ...(extra.mapEntry ? { options: { mapEntry: true } } : {}),
  };
}

// Plain init objects; `create` fills in the message types at run time.
const file = create(FileDescriptorProtoSchema, {
  name: 'process/process.proto',
  package: 'process',
  syntax: 'proto3',
  messageType: [
    msg('PTY', [{ name: 'size', number: 1, type: 'message', typeName: '.process.PTY.Size' }], {
      nested: [
        msg('Size', [
          { name: 'cols', number: 1, type: 'uint32' },
          { name: 'rows', number: 2, type: 'uint32' },
        ]),
      ],
    }),
    msg(
      'ProcessConfig',
      [
        { name: 'cmd', number: 1, type: 'string' },
        { name: 'args', number: 2, type: 'string', repeated: true },
        {
          name: 'envs',
          number: 3,
          type: 'message',
          typeName: '.process.ProcessConfig.EnvsEntry',
          repeated: true,
        },
        { name: 'cwd', number: 4, type: 'string', oneofIndex: 0, proto3Optional: true },
      ],
      {
        oneofs: ['_cwd'],
        nested: [
          msg(
            'EnvsEntry',
            [
              { name: 'key', number: 1, type: 'string' },
              { name: 'value', number: 2, type: 'string' },
            ],
            { mapEntry: true },
          ),
        ],
      },
    ),
    msg(
      'StartRequest',
      [
        { name: 'process', number: 1, type: 'message', typeName: '.process.ProcessConfig' },
        {
          name: 'pty',
          number: 2,
          type: 'message',
          typeName: '.process.PTY',
          oneofIndex: 0,
          proto3Optional: true,
        },
        { name: 'tag', number: 3, type: 'string', oneofIndex: 1, proto3Optional: true },
        { name: 'stdin', number: 4, type: 'bool', oneofIndex: 2, proto3Optional: true },
      ],
      { oneofs: ['_pty', '_tag', '_stdin'] },
    ),
    msg(
      'ProcessEvent',
      [
        {
          name: 'start',
          number: 1,
          type: 'message',
          typeName: '.process.ProcessEvent.StartEvent',
          oneofIndex: 0,
        },
        {
          name: 'data',
          number: 2,
          type: 'message',
          typeName: '.process.ProcessEvent.DataEvent',
          oneofIndex: 0,
        },
        {
          name: 'end',
          number: 3,
          type: 'message',
          typeName: '.process.ProcessEvent.EndEvent',
          oneofIndex: 0,
        },
        {
          name: 'keepalive',
          number: 4,
          type: 'message',
          typeName: '.process.ProcessEvent.KeepAlive',
          oneofIndex: 0,
        },
      ],
      {
        oneofs: ['event'],
        nested: [
          msg('StartEvent', [{ name: 'pid', number: 1, type: 'uint32' }]),
          msg(
            'DataEvent',
            [
              { name: 'stdout', number: 1, type: 'bytes', oneofIndex: 0 },
              { name: 'stderr', number: 2, type: 'bytes', oneofIndex: 0 },
              { name: 'pty', number: 3, type: 'bytes', oneofIndex: 0 },
            ],
            { oneofs: ['output'] },
          ),
          msg(
            'EndEvent',
            [
              { name: 'exit_code', number: 1, type: 'sint32' },
              { name: 'exited', number: 2, type: 'bool' },
              { name: 'status', number: 3, type: 'string' },
              { name: 'error', number: 4, type: 'string', oneofIndex: 0, proto3Optional: true },
            ],
            { oneofs: ['_error'] },
          ),
          msg('KeepAlive', []),
        ],
      },
    ),
    msg('StartResponse', [{ name: 'event', number: 1, type: 'message', typeName: '.process.ProcessEvent' }]),
    msg(
      'ProcessSelector',
      [
        { name: 'pid', number: 1, type: 'uint32', oneofIndex: 0 },
        { name: 'tag', number: 2, type: 'string', oneofIndex: 0 },
      ],
      { oneofs: ['selector'] },
    ),
    msg('SendSignalRequest', [
      { name: 'process', number: 1, type: 'message', typeName: '.process.ProcessSelector' },
      { name: 'signal', number: 2, type: 'enum', typeName: '.process.Signal' },
    ]),
    msg('SendSignalResponse', []),
  ],
  enumType: [
    {
      name: 'Signal',
      value: [
        { name: 'SIGNAL_UNSPECIFIED', number: 0 },
        { name: 'SIGNAL_SIGTERM', number: 15 },
        { name: 'SIGNAL_SIGKILL', number: 9 },
      ],
    },
  ],
  service: [
    {
      name: 'Process',
      method: [
        {
          name: 'Start',
          inputType: '.process.StartRequest',
          outputType: '.process.StartResponse',
          serverStreaming: true,
        },
        {
          name: 'SendSignal',
          inputType: '.process.SendSignalRequest',
          outputType: '.process.SendSignalResponse',
        },
      ],
    },
  ],
} as never);

const registry = createFileRegistry(file, () => undefined);

function need<D>(d: D | undefined, name: string): D {
  if (!d) throw new Error(`process.proto: ${name} missing`);
  return d;
}

/** `process.Process` with `Start` and `SendSignal`: `POST /process.Process/<Method>` under Connect. */
export const ProcessService: DescService = need(registry.getService('process.Process'), 'Process');
export const StartRequestSchema: DescMessage = need(
  registry.getMessage('process.StartRequest'),
  'StartRequest',
);
export const StartResponseSchema: DescMessage = need(
  registry.getMessage('process.StartResponse'),
  'StartResponse',
);

export const SIGKILL = 9;

/** The shapes of the messages as plain objects (what the Connect client yields). */
export interface StartRequestShape {
  process: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
  stdin?: boolean;
}
export type ProcessEventShape =
  | { case: 'start'; value: { pid: number } }
  | {
      case: 'data';
      value: { output: { case: 'stdout' | 'stderr' | 'pty'; value: Uint8Array } | { case: undefined } };
    }
  | { case: 'end'; value: { exitCode: number; exited: boolean; status: string; error?: string } }
  | { case: 'keepalive'; value: object }
  | { case: undefined; value?: undefined };
export interface SendSignalShape {
  process: { selector: { case: 'pid'; value: number } | { case: 'tag'; value: string } };
  signal: number;
}
