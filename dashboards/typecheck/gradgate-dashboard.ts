// The shape of a gradgate Grafana dashboard, as the type checker sees it: @grafana/schema's
// Dashboard with its panels narrowed to the two panel types the dashboards use (each with the
// options and field config of its panel plugin's schema) and Prometheus queries, plus the
// conventions of dashboards/README.md: uid gradgate-<file name>, tag gradgate, schemaVersion 39, a
// description and a unit on every panel, every query on the $datasource variable.
// generate.mjs checks each dashboards/gradgate-*.json against GradgateDashboard<name>.
import type {
  Dashboard,
  DataQuery,
  FieldConfig,
  FieldConfigSource,
  Panel,
  VariableModel,
} from '@grafana/schema';
// The panel plugins' option types are not re-exported by the package's index.
import type {
  Options as StatOptions,
} from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type {
  FieldConfig as TimeSeriesFieldConfig,
  Options as TimeSeriesOptions,
} from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';

/** T as JSON spells it: JSON has no enums, so a string enum becomes the union of its values. */
type AsJson<T> = T extends string
  ? `${T}`
  : T extends readonly (infer Element)[]
    ? AsJson<Element>[]
    : T extends object
      ? { [Key in keyof T]: AsJson<T[Key]> }
      : T;

/** Every panel and query reads the data source the dashboard's `datasource` variable picks. */
interface DatasourceVariable {
  type: 'prometheus';
  uid: '$datasource';
}

/** A Prometheus query (@grafana/schema does not ship the Prometheus data source's query type). */
interface PrometheusQuery extends Omit<DataQuery, 'datasource'> {
  datasource: DatasourceVariable;
  expr: string;
  legendFormat?: string;
  range?: boolean;
  instant?: boolean;
  editorMode?: 'code' | 'builder';
  format?: 'time_series' | 'table' | 'heatmap';
  interval?: string;
  exemplar?: boolean;
}

/** The units the dashboards use (Grafana unit ids). */
type Unit = 'bytes' | 'Bps' | 's' | 'percentunit' | 'none' | 'ops' | 'reqps';

/** A panel of plugin `Type` whose options and custom field config follow that plugin's schema. */
type PanelOf<Type extends string, Options, CustomFieldConfig> = Omit<
  Panel,
  'type' | 'description' | 'datasource' | 'options' | 'fieldConfig' | 'targets'
> & {
  type: Type;
  description: string;
  datasource: DatasourceVariable;
  options: Options;
  fieldConfig: Omit<FieldConfigSource, 'defaults'> & {
    defaults: Omit<FieldConfig, 'custom' | 'unit'> & { unit: Unit; custom?: CustomFieldConfig };
  };
  targets: PrometheusQuery[];
};

type TimeSeriesPanel = PanelOf<'timeseries', TimeSeriesOptions, TimeSeriesFieldConfig>;
type StatPanel = PanelOf<'stat', StatOptions, never>; // stat has no custom field config

/** The dashboard stored as dashboards/gradgate-<Name>.json. */
export type GradgateDashboard<Name extends string> = AsJson<
  Omit<Dashboard, 'uid' | 'tags' | 'schemaVersion' | 'panels' | 'templating'> & {
    uid: `gradgate-${Name}`;
    tags: ['gradgate'];
    schemaVersion: 39;
    panels: (TimeSeriesPanel | StatPanel)[];
    templating: { list: VariableModel[] };
  }
>;
